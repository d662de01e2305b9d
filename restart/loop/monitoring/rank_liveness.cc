#include "restart/loop/monitoring/rank_liveness.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "common/clock.h"
#include "common/log.h"
#include "plugin/net/liveness/stream_link.h"
#include "resilient/restart/errors.hpp"

namespace resilient::restart {

RankLiveness::RankLiveness() {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    throw RestartError(std::string("liveness link with the monitor process: socketpair: ") +
                       std::strerror(errno));
  }
  rankEnd_.reset(fds[0]);
  monitorEnd_.reset(fds[1]);
  wake_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake_.valid()) {
    throw RestartError(std::string("liveness link with the monitor process: eventfd: ") +
                       std::strerror(errno));
  }
}

RankLiveness::~RankLiveness() {
  stop();
}

void RankLiveness::start() {
  monitorEnd_.reset();
  const int fd = rankEnd_.release();
  try {
    thread_ = std::thread([this, fd] { run(fd); });
  } catch (const std::system_error& e) {
    ::close(fd);
    throw RestartError(std::string("liveness link with the monitor process: thread: ") + e.what());
  }
}

void RankLiveness::stop() noexcept {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    (void)!::write(wake_.get(), &one, sizeof one);
    thread_.join();
  }
}

void RankLiveness::run(int linkFd) noexcept {
  try {
    net::liveness::StreamLink link(net::liveness::thisProcessPolicy(), /*opener=*/false, linkFd,
                                   "its monitor process");
    for (;;) {
      pollfd fds[2] = {
          {link.fd(), static_cast<short>(POLLIN | (link.wantsWrite() ? POLLOUT : 0)), 0},
          {wake_.get(), POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0) {
        if (errno == EINTR) {
          continue;
        }
        RES_WARN(log::kRestart, "liveness link with the monitor process: poll: %s",
                 std::strerror(errno));
        return;
      }
      if (fds[1].revents != 0) {
        link.goodbye();
        return;
      }
      if ((fds[0].revents & POLLOUT) != 0) {
        link.flush();
      }
      if ((fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
        link.onReadable(monotonicNs());
      }
      if (!link.open()) {
        // The monitor said goodbye or is gone: nobody to answer.
        RES_INFO(
            log::kRestart, "liveness link with the monitor process ended: %s",
            link.state().deathReason().empty() ? "closed" : link.state().deathReason().c_str());
        return;
      }
    }
  } catch (const std::exception& e) {
    RES_WARN(log::kRestart, "liveness link with the monitor process: %s", e.what());
  }
}

}  // namespace resilient::restart
