// The recorder's process-wide state, one per exported plugin (net, profiler):
// created by the first init, never destroyed while a context is open (NCCL's
// threads may still call), freed when the module is unloaded or the process
// exits with no context open (else only its buffered lines are written out).
#pragma once

#include <atomic>
#include <mutex>

namespace resilient::recorder {

// State needs: `std::mutex mu`, a container `contexts` (guarded by mu) and a
// JsonlLog `log`.
template <class State>
class ProcessState {
 public:
  // The state, created at the first call; may throw std::bad_alloc.
  static State& acquire() {
    static State* const created = [] {
      static UnloadGuard guard;
      auto* s = new State();
      current_.store(s, std::memory_order_release);
      return s;
    }();
    return *created;
  }
  // The state if it exists (nullptr before the first init, and after unload).
  static State* current() noexcept { return current_.load(std::memory_order_acquire); }

 private:
  struct UnloadGuard {
    UnloadGuard() = default;
    ~UnloadGuard() {
      State* s = current_.load(std::memory_order_acquire);
      if (s == nullptr) {
        return;
      }
      bool idle = false;
      {
        std::lock_guard<std::mutex> lock(s->mu);
        idle = s->contexts.empty();
      }
      if (idle) {
        current_.store(nullptr, std::memory_order_release);
        delete s;
      } else {
        s->log.flush();
      }
    }
    UnloadGuard(const UnloadGuard&) = delete;
    UnloadGuard& operator=(const UnloadGuard&) = delete;
  };
  static inline std::atomic<State*> current_{nullptr};
};

}  // namespace resilient::recorder
