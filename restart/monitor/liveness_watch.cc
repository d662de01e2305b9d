#include "restart/monitor/liveness_watch.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "common/clock.h"
#include "plugin/net/liveness/stream_link.h"

namespace resilient::restart::monitor {

LivenessWatch::LivenessWatch(const net::liveness::Policy& policy, int fd, std::string rankText,
                             const protocol::StatusPage& page, std::function<bool()> exiting)
    : page_(page),
      wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      stop_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (!wake_.valid() || !stop_.valid()) {
    ::close(fd);
    throw std::runtime_error(std::string("liveness link: eventfd: ") + std::strerror(errno));
  }
  thread_ = std::thread([this, policy, fd, rankText, exiting = std::move(exiting)] {
    run(policy, fd, rankText, exiting);
  });
}

LivenessWatch::~LivenessWatch() {
  const uint64_t one = 1;
  (void)!::write(stop_.get(), &one, sizeof one);
  thread_.join();
}

void LivenessWatch::notify() noexcept {
  const uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof one);
}

std::optional<LivenessWatch::Verdict> LivenessWatch::verdict() {
  std::lock_guard<std::mutex> lock(mutex_);
  return verdict_;
}

std::optional<std::string> LivenessWatch::ended() {
  std::lock_guard<std::mutex> lock(mutex_);
  return ended_;
}

bool LivenessWatch::exiting() {
  std::lock_guard<std::mutex> lock(mutex_);
  return exiting_;
}

void LivenessWatch::run(const net::liveness::Policy& policy, int fd, const std::string& rankText,
                        const std::function<bool()>& exiting) noexcept {
  try {
    net::liveness::StreamLink link(policy, /*opener=*/true, fd, rankText);
    for (;;) {
      const uint64_t now = monotonicNs();
      link.onReadable(now);
      if (!link.open()) {
        const std::string& death = link.state().deathReason();
        std::lock_guard<std::mutex> lock(mutex_);
        ended_ = death.empty() ? std::string("goodbye") : death;
        break;
      }
      // Asked before the tick sends the next one: a ping interval late.
      if (link.state().lastPingUnanswered() && exiting && exiting()) {
        std::lock_guard<std::mutex> lock(mutex_);
        exiting_ = true;
        break;
      }
      const protocol::RankPhase phase = page_.currentPhase();
      const bool judged = !protocol::leftTheLoop(phase);
      if (judged) {
        if (const std::optional<uint64_t> silent = link.tick(now)) {
          const net::Fault f = link.silenceFault(*silent);
          std::lock_guard<std::mutex> lock(mutex_);
          verdict_ = Verdict{*silent, f.detail,
                             link.state().helloSeen() ? link.state().host() : std::string()};
          break;
        }
      }
      const uint64_t next = link.nextTickNs(now);
      const uint64_t after = monotonicNs();
      const int waitMs = next > after ? static_cast<int>((next - after + 999999) / 1000000) : 0;
      pollfd fds[2] = {
          {link.fd(), static_cast<short>(POLLIN | (link.wantsWrite() ? POLLOUT : 0)), 0},
          {stop_.get(), POLLIN, 0}};
      if (::poll(fds, 2, waitMs) < 0 && errno != EINTR) {
        std::lock_guard<std::mutex> lock(mutex_);
        ended_ = std::string("poll: ") + std::strerror(errno);
        break;
      }
      if (fds[1].revents != 0) {
        return;  // the monitor ends
      }
      if ((fds[0].revents & POLLOUT) != 0) {
        link.flush();
      }
    }
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(mutex_);
    ended_ = e.what();
  }
  notify();
}

}  // namespace resilient::restart::monitor
