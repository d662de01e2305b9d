// Helper threads for the server's write bursts. The event-loop thread owns
// every connection; when one event (a barrier completing) leaves thousands
// of connections with a reply to write, it splits them into disjoint parts,
// writes one part itself and lets each helper write another, then waits
// for all before touching any connection again. Each send is a trip through
// the kernel's TCP stack, so spreading a 16k-reply burst over the cores
// shortens the release by about the number of cores.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace resilient::store::tcp {

class SendPool {
 public:
  // `helpers` threads besides the caller (0: everything runs on the caller).
  explicit SendPool(int helpers);
  ~SendPool();
  SendPool(const SendPool&) = delete;
  SendPool& operator=(const SendPool&) = delete;

  int helpers() const noexcept { return static_cast<int>(threads_.size()); }
  int parts() const noexcept { return helpers() + 1; }
  // Calls fn(part) once for every part in [0, parts()), each on its own
  // thread (part 0 on the caller's); returns when every call is done.
  void run(const std::function<void(size_t part)>& fn);

 private:
  void helperLoop(size_t index);

  std::mutex mu_;
  std::condition_variable start_;
  std::condition_variable done_;
  uint64_t generation_ = 0;
  bool stop_ = false;
  size_t remaining_ = 0;
  const std::function<void(size_t)>* fn_ = nullptr;
  std::vector<std::thread> threads_;
};

}  // namespace resilient::store::tcp
