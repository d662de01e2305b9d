#include "plugin/net/watchdog.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>

#include "plugin/net/blackbox_table.h"
#include "plugin/net/liveness/peer_link.h"

namespace resilient::net {
namespace {

// Stored in epoll_event.data.ptr for the wake-up eventfd; every other tag
// is the liveness channel's.
char gWakeTag;

liveness::ChannelOptions channelOptions(const WatchdogOptions& o) {
  liveness::ChannelOptions c;
  c.policy.timeoutMs = o.livenessTimeoutMs;
  c.policy.tokenDigest = o.tokenDigest;
  c.bindAddress = o.bindAddress;
  c.hostName = o.hostName;
  return c;
}

}  // namespace

Watchdog::Watchdog(transport::Transport& inner, FaultSink& sink, const WatchdogOptions& options,
                   blackbox::Writer* blackbox, const Clock& clock)
    : inner_(inner),
      sink_(sink),
      livenessTimeoutMs_(options.livenessTimeoutMs),
      blackbox_(blackbox),
      clock_(clock),
      progress_(options.progressTimeoutMs, sink),
      channel_(channelOptions(options), connections_, sink) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    channel_.sayGoodbyeToAll();
  }
  if (thread_.joinable()) {
    thread_.request_stop();
    wake();
    thread_.join();
  }
  for (int fd : {wakeFd_, epollFd_}) {
    if (fd >= 0) {
      ::close(fd);
    }
  }
  // channel_ closes its sockets as it goes.
}

void Watchdog::wake() noexcept {
  if (wakeFd_ >= 0) {
    const uint64_t one = 1;
    ssize_t ignored = ::write(wakeFd_, &one, sizeof one);
    (void)ignored;
  }
}

void Watchdog::ensureThreadLocked() {
  if (thread_.joinable()) {
    return;
  }
  epollFd_ = epoll_create1(EPOLL_CLOEXEC);
  wakeFd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = &gWakeTag;
  epoll_ctl(epollFd_, EPOLL_CTL_ADD, wakeFd_, &ev);
  channel_.setPoller(epollFd_);
  thread_ = std::jthread([this](const std::stop_token& stop) { run(stop); });
}

uint64_t Watchdog::newListenNonce() {
  std::lock_guard<std::mutex> lock(mutex_);
  return channel_.newListenNonce();
}

bool Watchdog::trailerFor(uint64_t nonce, HandleTrailer* out) {
  std::lock_guard<std::mutex> lock(mutex_);
  ensureThreadLocked();
  return channel_.trailerFor(nonce, out);
}

void Watchdog::forgetListenNonce(uint64_t nonce) {
  std::lock_guard<std::mutex> lock(mutex_);
  channel_.forgetListenNonce(nonce);
}

void Watchdog::attachConnector(ConnectionRecord& conn, const HandleTrailer& trailer) {
  std::lock_guard<std::mutex> lock(mutex_);
  ensureThreadLocked();
  channel_.attachConnector(conn, trailer);
  wake();
}

void Watchdog::attachAcceptor(ConnectionRecord& conn, uint64_t listenNonce) {
  std::lock_guard<std::mutex> lock(mutex_);
  channel_.attachAcceptor(conn, listenNonce);
}

void Watchdog::add(ConnectionRecord* conn) {
  std::lock_guard<std::mutex> lock(mutex_);
  ensureThreadLocked();
  connections_.insert(conn);
  if (blackbox_ != nullptr) {
    conn->blackboxSlot = blackbox_->claimConnection();
  }
}

void Watchdog::remove(ConnectionRecord* conn) {
  std::lock_guard<std::mutex> lock(mutex_);
  connections_.erase(conn);
  if (blackbox_ != nullptr) {
    blackbox_->releaseConnection(conn->blackboxSlot);
  }
  channel_.detach(*conn);
}

void Watchdog::tick(uint64_t now) {
  for (ConnectionRecord* conn : connections_) {
    if (conn->fault() != nullptr || conn->outstanding() == 0) {
      continue;
    }
    uint64_t bytes = 0;
    const bool counted = inner_.bytesMoved(conn->inner(), &bytes);
    progress_.observe(*conn, counted ? std::optional<uint64_t>(bytes) : std::nullopt, now);
    if (const std::optional<Fault> death = liveness::deathOf(*conn)) {
      sink_.report(*conn, *death);
      continue;
    }
    if (progress_.failIfStuck(*conn, now)) {
      continue;
    }
    liveness::markBusy(*conn);
  }
  channel_.tick(now);
}

void Watchdog::run(const std::stop_token& stop) {
  const int tickMs = static_cast<int>(std::clamp<int64_t>(livenessTimeoutMs_ / 20, 5, 50));
  std::array<epoll_event, 64> events{};
  while (!stop.stop_requested()) {
    const int n = epoll_wait(epollFd_, events.data(), static_cast<int>(events.size()), tickMs);
    const uint64_t now = clock_.monoNs();
    std::lock_guard<std::mutex> lock(mutex_);
    for (int i = 0; i < n; ++i) {
      const epoll_event& event = events[static_cast<size_t>(i)];
      if (event.data.ptr == &gWakeTag) {
        uint64_t drained = 0;
        ssize_t ignored = ::read(wakeFd_, &drained, sizeof drained);
        (void)ignored;
      } else {
        channel_.onEvent(event.data.ptr, event.events, now);
      }
    }
    tick(now);
    if (blackbox_ != nullptr) {
      publishConnections(*blackbox_, connections_, now, clock_.wallNs());
    }
  }
}

}  // namespace resilient::net
