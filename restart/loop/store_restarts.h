// The job's store came back empty: its server was restarted (by the agent
// that hosts it, tools/run/; docs/restart.md, "The store is not a single point
// of failure"). The store client follows the new instance
// (store::ClientOptions::followRestarts) and notes it here from inside a
// store call; this thread then puts back what the rank keeps in the store
// (`restore`), outside any store call. While no restart is in progress the
// job loses no step: ranks keep training, the monitors' heartbeats come back
// at their next beat. A fault that needs the store while it is gone ends the
// job as any unreachable store does (StoreUnavailable).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

namespace resilient::restart {

class StoreRestarts {
 public:
  explicit StoreRestarts(std::function<void()> restore);
  ~StoreRestarts();
  StoreRestarts(const StoreRestarts&) = delete;
  StoreRestarts& operator=(const StoreRestarts&) = delete;

  // From the store client's onServerRestart: only takes note.
  void noteRestart() noexcept;
  // Restarts noted so far.
  uint64_t count() const;
  // No restore runs after this returns (the store client, which shares this
  // object, may outlive the rank's loop).
  void stop();

 private:
  void run(const std::stop_token& stop);

  std::function<void()> restore_;
  mutable std::mutex mutex_;
  std::condition_variable_any changed_;
  uint64_t noted_ = 0;
  std::jthread thread_;
};

}  // namespace resilient::restart
