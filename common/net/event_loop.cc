#include "common/net/event_loop.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

namespace resilient {

EventLoop::EventLoop(int maxEvents)
    : epoll_(::epoll_create1(EPOLL_CLOEXEC)),
      wake_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
      events_(static_cast<size_t>(maxEvents > 0 ? maxEvents : 1)) {
  if (epoll_.valid() && wake_.valid()) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = this;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &ev) != 0) {
      wake_.reset();
    }
  }
}

Status EventLoop::status() const {
  if (!epoll_.valid() || !wake_.valid()) {
    return systemError("event loop: epoll_create1/eventfd");
  }
  return {};
}

Status EventLoop::control(int op, int fd, uint32_t events, void* tag) {
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = tag;
  if (::epoll_ctl(epoll_.get(), op, fd, &ev) != 0) {
    return systemError(op == EPOLL_CTL_ADD ? "epoll_ctl(ADD)" : "epoll_ctl(MOD)");
  }
  return {};
}

Status EventLoop::add(int fd, uint32_t events, void* tag) {
  return control(EPOLL_CTL_ADD, fd, events, tag);
}

Status EventLoop::modify(int fd, uint32_t events, void* tag) {
  return control(EPOLL_CTL_MOD, fd, events, tag);
}

void EventLoop::remove(int fd) noexcept {
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
}

void EventLoop::wake() noexcept {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_.get(), &one, sizeof one);
}

void EventLoop::drainWake() noexcept {
  uint64_t count = 0;
  [[maybe_unused]] const ssize_t n = ::read(wake_.get(), &count, sizeof count);
}

Result<int> EventLoop::waitReady(int timeoutMs) {
  const int n =
      ::epoll_wait(epoll_.get(), events_.data(), static_cast<int>(events_.size()), timeoutMs);
  if (n < 0) {
    if (errno == EINTR) {
      return 0;
    }
    return systemError("epoll_wait");
  }
  return n;
}

}  // namespace resilient
