// The one event loop of the project: an epoll set of non-blocking
// descriptors, each registered with a tag, plus a wake-up eventfd that any
// thread may signal. The loop does not own a thread: its owner (the net
// plugin's watchdog, the store server, the host engine's rendezvous server)
// calls wait() from its own thread and does its timers between waits.
// Level-triggered unless a descriptor asks for kEdgeTriggered.
//
// Threads: add/modify/remove/wait from the owner's thread (or under the
// owner's lock); wake() from any thread, and it is async-signal-safe.
#pragma once

#include <sys/epoll.h>

#include <cstdint>
#include <vector>

#include "common/file_descriptor.h"
#include "common/status.h"

namespace resilient {

class EventLoop {
 public:
  static constexpr uint32_t kReadable = EPOLLIN;
  static constexpr uint32_t kWritable = EPOLLOUT;
  static constexpr uint32_t kErrorOrHangup = EPOLLERR | EPOLLHUP;
  // Report a descriptor once per change of readiness, not while it lasts
  // (for callers that always drain to EAGAIN).
  static constexpr uint32_t kEdgeTriggered = EPOLLET;

  // `maxEvents`: how many ready descriptors one wait() reports at most.
  explicit EventLoop(int maxEvents = 64);
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Whether the epoll set and the eventfd were created (a system error if not).
  Status status() const;

  // Watches `fd` for `events` (kReadable | kWritable); errors and hang-ups
  // are always reported. `tag` comes back with each of its events.
  Status add(int fd, uint32_t events, void* tag);
  Status modify(int fd, uint32_t events, void* tag);
  // Stops watching `fd` (closing it does the same).
  void remove(int fd) noexcept;

  // Ends the current or the next wait() early.
  void wake() noexcept;

  // Waits up to `timeoutMs` (-1: until an event or a wake) and calls
  // onEvent(tag, events) for each ready descriptor; a wake-up is drained and
  // not reported. Returns the number of events reported (0 after a timeout,
  // a wake or a signal), or a system error.
  template <class OnEvent>
  Result<int> wait(int timeoutMs, OnEvent&& onEvent) {
    Result<int> n = waitReady(timeoutMs);
    if (!n.ok()) {
      return n;
    }
    int reported = 0;
    for (int i = 0; i < *n; ++i) {
      const epoll_event& e = events_[static_cast<size_t>(i)];
      if (e.data.ptr == this) {
        drainWake();
        continue;
      }
      onEvent(e.data.ptr, e.events);
      ++reported;
    }
    return reported;
  }

 private:
  Status control(int op, int fd, uint32_t events, void* tag);
  Result<int> waitReady(int timeoutMs);
  void drainWake() noexcept;

  FileDescriptor epoll_;
  FileDescriptor wake_;
  std::vector<epoll_event> events_;
};

}  // namespace resilient
