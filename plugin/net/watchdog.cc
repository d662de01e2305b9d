#include "plugin/net/watchdog.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "common/clock.h"
#include "common/log.h"
#include "common/net/interfaces.h"
#include "plugin/net/core.h"

namespace resilient::net {
namespace {

constexpr uint64_t kMs = 1000000;
constexpr size_t kMaxPendingOut = 4096;  // a peer that reads nothing gets no more pings

bool sameAddress(const SocketAddress& a, const SocketAddress& b) {
  return a.length == b.length && std::memcmp(&a.storage, &b.storage, a.length) == 0;
}

void setNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// Sentinels stored in epoll_event.data.ptr for the two non-link descriptors.
char gWakeTag;
char gListenTag;

}  // namespace

Watchdog::Watchdog(Core& core, WatchdogOptions options, blackbox::Writer* blackbox)
    : core_(core), options_(std::move(options)), blackbox_(blackbox) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& link : links_) {
      if (link->outgoing && link->state == PeerLink::State::kUp) {
        send(link.get(), liveness::makeFrame(liveness::Type::kGoodbye));
      }
    }
  }
  if (thread_.joinable()) {
    thread_.request_stop();
    wake();
    thread_.join();
  }
  for (auto& link : links_) {
    if (link->fd >= 0) {
      ::close(link->fd);
    }
  }
  for (int fd : {listenFd_, wakeFd_, epollFd_}) {
    if (fd >= 0) {
      ::close(fd);
    }
  }
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
  thread_ = std::jthread([this](const std::stop_token& stop) { run(stop); });
}

bool Watchdog::ensureListenerLocked() {
  if (listenFd_ >= 0) {
    return true;
  }
  const SocketAddress& bindAddress = options_.bindAddress;
  if (bindAddress.length == 0) {
    return false;
  }
  const int fd = ::socket(bindAddress.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    RES_WARN(NCCL_NET, "liveness channel: socket: %s; running without it",
             errnoText(errno).c_str());
    return false;
  }
  const SocketAddress bound =
      ::bind(fd, bindAddress.get(), bindAddress.length) == 0 && ::listen(fd, 512) == 0
          ? localAddressOf(fd)
          : SocketAddress{};
  if (bound.length == 0) {
    RES_WARN(NCCL_NET, "liveness channel: cannot listen on %s: %s; running without it",
             bindAddress.toString().c_str(), errnoText(errno).c_str());
    ::close(fd);
    return false;
  }
  listenFd_ = fd;
  listenAddress_ = bound;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = &gListenTag;
  epoll_ctl(epollFd_, EPOLL_CTL_ADD, listenFd_, &ev);
  RES_INFO(NCCL_NET | NCCL_INIT, "liveness channel listening on %s", bound.toString().c_str());
  return true;
}

uint64_t Watchdog::newListenNonce() {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t nonce = nextNonce_++;
  listenNonces_.insert(nonce);
  return nonce;
}

bool Watchdog::trailerFor(uint64_t nonce, HandleTrailer* out) {
  std::lock_guard<std::mutex> lock(mutex_);
  ensureThreadLocked();
  if (!ensureListenerLocked()) {
    return false;
  }
  out->listenNonce = nonce;
  out->pid = static_cast<uint32_t>(getpid());
  out->liveness = listenAddress_.storage;
  return true;
}

void Watchdog::forgetListenNonce(uint64_t nonce) {
  std::lock_guard<std::mutex> lock(mutex_);
  // NCCL closes a listen comm right after its accept: connections still
  // waiting for their peer's bind (awaitingBind_) keep the nonce usable.
  listenNonces_.erase(nonce);
  boundNonces_.erase(nonce);
}

void Watchdog::attachConnector(ConnectionRecord& conn, const HandleTrailer& trailer) {
  std::lock_guard<std::mutex> lock(mutex_);
  ensureThreadLocked();
  const SocketAddress peer =
      SocketAddress::fromSockaddr(reinterpret_cast<const sockaddr*>(&trailer.liveness));
  PeerLink* link = nullptr;
  for (auto& l : links_) {
    if (l->outgoing && !l->retired && l->state != PeerLink::State::kDead &&
        l->state != PeerLink::State::kClosed && sameAddress(l->address, peer) &&
        l->pid.load() == trailer.pid) {
      link = l.get();
      break;
    }
  }
  if (link == nullptr) {
    auto fresh = std::make_unique<PeerLink>();
    fresh->outgoing = true;
    fresh->address = peer;
    fresh->addressText = peer.toString();
    fresh->pid = trailer.pid;
    link = fresh.get();
    links_.push_back(std::move(fresh));
    startConnect(link);
    send(link, liveness::makeHello(options_.tokenDigest, static_cast<uint32_t>(getpid()),
                                   options_.hostName));
  }
  send(link, liveness::makeFrame(liveness::Type::kBind, trailer.listenNonce));
  ++link->connections;
  conn.link.store(link, std::memory_order_release);
  wake();
}

void Watchdog::attachAcceptor(ConnectionRecord& conn, uint64_t listenNonce) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = boundNonces_.find(listenNonce);
  if (it != boundNonces_.end()) {
    ++it->second->connections;
    conn.link.store(it->second, std::memory_order_release);
  } else {
    awaitingBind_[listenNonce].push_back(&conn);
  }
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
  for (auto it = awaitingBind_.begin(); it != awaitingBind_.end();) {
    auto& waiting = it->second;
    waiting.erase(std::remove(waiting.begin(), waiting.end(), conn), waiting.end());
    it = waiting.empty() ? awaitingBind_.erase(it) : std::next(it);
  }
  PeerLink* link = conn->link.exchange(nullptr);
  if (link == nullptr || --link->connections > 0 || !link->outgoing) {
    return;  // incoming links stay open until their initiator closes them
  }
  if (link->state == PeerLink::State::kUp) {
    send(link, liveness::makeFrame(liveness::Type::kGoodbye));
  }
  closeLink(link);
}

void Watchdog::closeLink(PeerLink* link) {
  if (link->fd >= 0) {
    epoll_ctl(epollFd_, EPOLL_CTL_DEL, link->fd, nullptr);
    ::close(link->fd);
    link->fd = -1;
  }
  for (auto it = boundNonces_.begin(); it != boundNonces_.end();) {
    it = it->second == link ? boundNonces_.erase(it) : std::next(it);
  }
  if (link->state != PeerLink::State::kDead) {
    link->state = PeerLink::State::kClosed;
  }
  if (link->connections <= 0) {
    link->retired = true;
  }
}

void Watchdog::reap() {
  links_.erase(
      std::remove_if(links_.begin(), links_.end(), [](const auto& l) { return l->retired; }),
      links_.end());
}

void Watchdog::startConnect(PeerLink* link) {
  link->fd = ::socket(link->address.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (link->fd < 0) {
    markDead(link, "liveness channel: socket: " + errnoText(errno), monotonicNs());
    return;
  }
  setNoDelay(link->fd);
  const int rc = ::connect(link->fd, link->address.get(), link->address.length);
  link->state = PeerLink::State::kConnecting;
  if (rc != 0 && errno != EINPROGRESS) {
    markDead(link, "liveness channel to " + link->addressText + ": connect: " + errnoText(errno),
             monotonicNs());
    return;
  }
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT;
  ev.data.ptr = link;
  epoll_ctl(epollFd_, EPOLL_CTL_ADD, link->fd, &ev);
}

void Watchdog::updateEpoll(PeerLink* link) {
  if (link->fd < 0) {
    return;
  }
  epoll_event ev{};
  const bool wantWrite = !link->out.empty() || link->state == PeerLink::State::kConnecting;
  ev.events = EPOLLIN | (wantWrite ? static_cast<uint32_t>(EPOLLOUT) : 0u);
  ev.data.ptr = link;
  epoll_ctl(epollFd_, EPOLL_CTL_MOD, link->fd, &ev);
}

void Watchdog::send(PeerLink* link, const liveness::Frame& frame) {
  if (link->fd < 0 || link->state == PeerLink::State::kDead) {
    return;
  }
  if (frame.type == liveness::Type::kPing && link->out.size() > kMaxPendingOut) {
    return;
  }
  liveness::encode(frame, &link->out);
  flush(link);
}

void Watchdog::flush(PeerLink* link) {
  while (!link->out.empty() && link->fd >= 0 && link->state != PeerLink::State::kConnecting) {
    const ssize_t n =
        ::send(link->fd, link->out.data(), link->out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      link->out.erase(0, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      break;
    }
    markDead(link, "liveness channel to " + link->addressText + ": send: " + errnoText(errno),
             monotonicNs());
    return;
  }
  updateEpoll(link);
}

void Watchdog::markDead(PeerLink* link, const std::string& reason, uint64_t now) {
  (void)now;
  if (link->state == PeerLink::State::kDead) {
    return;
  }
  if (link->fd >= 0) {
    epoll_ctl(epollFd_, EPOLL_CTL_DEL, link->fd, nullptr);
    ::close(link->fd);
    link->fd = -1;
  }
  link->out.clear();
  link->state = PeerLink::State::kDead;
  link->deathReason = reason;
  failBusy(link, FaultClass::kPeerExited, reason);
  if (link->connections <= 0) {
    closeLink(link);
  }
}

void Watchdog::failBusy(PeerLink* link, FaultClass cls, const std::string& detail) {
  for (ConnectionRecord* conn : connections_) {
    if (conn->link.load(std::memory_order_relaxed) == link && conn->outstanding() > 0 &&
        conn->fault() == nullptr) {
      core_.fail(*conn, cls, Status(), detail);
    }
  }
}

void Watchdog::handleListener(uint64_t now) {
  while (true) {
    SocketAddress peer;
    peer.length = sizeof peer.storage;
    const int fd = ::accept4(listenFd_, peer.get(), &peer.length, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      return;  // EAGAIN, or a transient error: the listener stays armed
    }
    setNoDelay(fd);
    auto link = std::make_unique<PeerLink>();
    link->fd = fd;
    link->outgoing = false;
    link->state = PeerLink::State::kUp;
    link->address = peer;
    link->addressText = peer.toString();
    link->lastHeardNs = now;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = link.get();
    epoll_ctl(epollFd_, EPOLL_CTL_ADD, fd, &ev);
    PeerLink* raw = link.get();
    links_.push_back(std::move(link));
    send(raw, liveness::makeHello(options_.tokenDigest, static_cast<uint32_t>(getpid()),
                                  options_.hostName));
  }
}

void Watchdog::handleLink(PeerLink* link, uint32_t events, uint64_t now) {
  if (link->state == PeerLink::State::kConnecting &&
      (events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) != 0) {
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(link->fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      markDead(link,
               "liveness channel to " + link->addressText + ": connect: " + errnoText(err) +
                   " (the peer process is gone)",
               now);
      return;
    }
    link->state = PeerLink::State::kUp;
    link->lastHeardNs = std::max(link->lastHeardNs, now);
  }
  if ((events & EPOLLOUT) != 0) {
    flush(link);
  }
  if ((events & (EPOLLIN | EPOLLERR | EPOLLHUP)) == 0 || link->fd < 0) {
    return;
  }
  std::array<char, 4096> buf{};
  while (link->fd >= 0) {
    const ssize_t n = ::recv(link->fd, buf.data(), buf.size(), MSG_DONTWAIT);
    if (n > 0) {
      link->decoder.feed(buf.data(), static_cast<size_t>(n));
      liveness::Frame frame;
      std::string error;
      while (true) {
        const auto r = link->decoder.next(&frame, &error);
        if (r == liveness::Decoder::Result::kNeedMore) {
          break;
        }
        if (r == liveness::Decoder::Result::kError) {
          RES_WARN(NCCL_NET, "liveness channel from %s: %s; dropping the connection",
                   link->addressText.c_str(), error.c_str());
          markDead(link,
                   "liveness channel from " + link->addressText + " sent invalid data: " + error,
                   now);
          return;
        }
        onFrame(link, frame, now);
        if (link->fd < 0) {
          return;
        }
      }
      continue;
    }
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return;
    }
    if (link->state == PeerLink::State::kClosed) {
      closeLink(link);  // orderly: goodbye, then EOF
      return;
    }
    markDead(link,
             n == 0
                 ? "the peer process closed its liveness channel without goodbye (process exited)"
                 : "liveness channel: " + errnoText(errno),
             now);
    return;
  }
}

void Watchdog::onFrame(PeerLink* link, const liveness::Frame& frame, uint64_t now) {
  link->lastHeardNs = now;
  switch (frame.type) {
    case liveness::Type::kHello:
      if (options_.tokenDigest != 0 && frame.value != options_.tokenDigest) {
        RES_WARN(NCCL_NET, "liveness channel from %s (pid %u): job token mismatch; refused",
                 link->addressText.c_str(), frame.pid);
        send(link, liveness::makeFrame(liveness::Type::kRefused));
        markDead(link, "peer " + link->addressText + " presented another job token", now);
        return;
      }
      if (!link->helloSeen.load(std::memory_order_relaxed)) {
        link->host = frame.host;
        link->pid.store(frame.pid, std::memory_order_relaxed);
        link->helloSeen.store(true, std::memory_order_release);
      }
      return;
    case liveness::Type::kBind: {
      const bool open = listenNonces_.count(frame.value) != 0;
      if (link->outgoing || (!open && awaitingBind_.count(frame.value) == 0)) {
        return;  // not one of our listen comms (closed, and nobody waits for it)
      }
      if (open) {
        boundNonces_[frame.value] = link;
      }
      auto waiting = awaitingBind_.find(frame.value);
      if (waiting != awaitingBind_.end()) {
        for (ConnectionRecord* conn : waiting->second) {
          ++link->connections;
          conn->link.store(link, std::memory_order_release);
        }
        awaitingBind_.erase(waiting);
      }
      return;
    }
    case liveness::Type::kPing:
      send(link, liveness::makeFrame(liveness::Type::kPong, frame.value));
      return;
    case liveness::Type::kPong: return;
    case liveness::Type::kGoodbye: link->state = PeerLink::State::kClosed; return;
    case liveness::Type::kRefused:
      markDead(link, "peer " + link->addressText + " refused our job token", now);
      return;
  }
}

void Watchdog::scan(uint64_t now) {
  const uint64_t livenessNs = static_cast<uint64_t>(options_.livenessTimeoutMs) * kMs;
  const uint64_t progressNs = static_cast<uint64_t>(options_.progressTimeoutMs) * kMs;
  std::set<PeerLink*> busy;
  for (ConnectionRecord* conn : connections_) {
    if (conn->fault() != nullptr || conn->outstanding() == 0) {
      continue;
    }
    // Progress, stamped here (the data path reads no clock): the first busy
    // period, a request completed since the last busy scan (which is also how
    // every later busy period begins: only completions make a connection
    // idle), or bytes moved.
    uint64_t bytes = 0;
    const uint64_t completed = conn->completedRequests();
    const bool moved =
        core_.inner().bytesMoved(conn->inner(), &bytes) && bytes != conn->watchdogBytesSeen;
    if (conn->lastProgressNs() == 0 || completed != conn->watchdogCompletedSeen || moved) {
      conn->watchdogCompletedSeen = completed;
      if (moved) {
        conn->watchdogBytesSeen = bytes;
      }
      conn->noteProgress(now);
    }
    PeerLink* link = conn->link.load(std::memory_order_relaxed);
    if (link != nullptr && link->state == PeerLink::State::kDead) {
      core_.fail(*conn, FaultClass::kPeerExited, Status(), link->deathReason);
      continue;
    }
    const uint64_t last = conn->lastProgressNs();
    if (progressNs > 0 && last != 0 && now > last + progressNs) {
      char detail[200];
      snprintf(detail, sizeof detail,
               "no bytes moved for %.0f ms (threshold %lld ms) while the peer answers heartbeats",
               static_cast<double>(now - last) / 1e6,
               static_cast<long long>(options_.progressTimeoutMs));
      core_.fail(*conn, FaultClass::kPeerStuck, Status(), detail);
      continue;
    }
    if (link != nullptr &&
        (link->state == PeerLink::State::kUp || link->state == PeerLink::State::kConnecting)) {
      busy.insert(link);
    }
  }
  const uint64_t pingEvery = std::max<uint64_t>(livenessNs / 4, kMs);
  std::vector<PeerLink*> snapshot;
  for (auto& l : links_) {
    snapshot.push_back(l.get());
  }
  for (PeerLink* link : snapshot) {
    if (link->retired || busy.count(link) == 0) {
      link->armedSinceNs = 0;
      continue;
    }
    if (link->armedSinceNs == 0) {
      link->armedSinceNs = now;
    }
    if (now >= link->lastPingNs + pingEvery) {
      link->lastPingNs = now;
      send(link, liveness::makeFrame(liveness::Type::kPing, ++link->pingSeq));
    }
    const uint64_t since = std::max(link->lastHeardNs, link->armedSinceNs);
    if (now > since + livenessNs) {
      const double silentMs = static_cast<double>(now - since) / 1e6;
      const auto threshold = static_cast<long long>(options_.livenessTimeoutMs);
      char detail[256];
      // A local interface that is down or without carrier explains the silence:
      // the link is cut, which says nothing against the peer process.
      const std::optional<net::LinkState> local = net::linkStateOf(localAddressOf(link->fd));
      if (local && (!local->up || !local->carrier)) {
        snprintf(detail, sizeof detail,
                 "no answer to heartbeats for %.0f ms (threshold %lld ms) and the local "
                 "interface %s is %s: the link to the peer is cut",
                 silentMs, threshold, local->name.c_str(), !local->up ? "down" : "without carrier");
        failBusy(link, FaultClass::kLinkDown, detail);
      } else {
        snprintf(detail, sizeof detail,
                 "no answer to heartbeats for %.0f ms (threshold %lld ms): the peer process or "
                 "its host is gone, frozen or unreachable",
                 silentMs, threshold);
        failBusy(link, FaultClass::kPeerUnresponsive, detail);
      }
    }
  }
}

void Watchdog::run(const std::stop_token& stop) {
  const int tickMs = static_cast<int>(std::clamp<int64_t>(options_.livenessTimeoutMs / 20, 5, 50));
  std::array<epoll_event, 64> events{};
  while (!stop.stop_requested()) {
    const int n = epoll_wait(epollFd_, events.data(), static_cast<int>(events.size()), tickMs);
    const uint64_t now = monotonicNs();
    std::lock_guard<std::mutex> lock(mutex_);
    for (int i = 0; i < n; ++i) {
      void* tag = events[static_cast<size_t>(i)].data.ptr;
      if (tag == &gWakeTag) {
        uint64_t drained = 0;
        ssize_t ignored = ::read(wakeFd_, &drained, sizeof drained);
        (void)ignored;
      } else if (tag == &gListenTag) {
        handleListener(now);
      } else {
        auto* link = static_cast<PeerLink*>(tag);
        const bool alive = std::any_of(links_.begin(), links_.end(), [link](const auto& l) {
          return l.get() == link && !l->retired;
        });
        if (alive) {
          handleLink(link, events[static_cast<size_t>(i)].events, now);
        }
      }
    }
    scan(now);
    reap();
    publish(now);
  }
}

void Watchdog::publish(uint64_t now) {
  if (blackbox_ == nullptr) {
    return;
  }
  timespec wall{};
  clock_gettime(CLOCK_REALTIME, &wall);
  blackbox_->heartbeat(now, static_cast<uint64_t>(wall.tv_sec) * 1000000000ull +
                                static_cast<uint64_t>(wall.tv_nsec));
  for (ConnectionRecord* conn : connections_) {
    resilient_blackbox_connection c{};
    c.state =
        conn->fault() != nullptr ? RESILIENT_BLACKBOX_CONN_FAULTED : RESILIENT_BLACKBOX_CONN_OPEN;
    c.commId = conn->commId();
    c.direction = conn->direction() == ConnectionRecord::Direction::kSend ? 0 : 1;
    blackbox::copyText(c.local, conn->identity.local.text);
    blackbox::copyText(c.peer, conn->identity.peer.text);
    if (const PeerLink* link = conn->link.load(std::memory_order_relaxed)) {
      c.peerPid = link->pid.load(std::memory_order_relaxed);
      if (link->helloSeen.load(std::memory_order_acquire)) {
        blackbox::copyText(c.peerHost, link->host);
      }
    }
    c.completedRequests = conn->completedRequests();
    c.completedBytes = conn->bytesCompleted();
    c.outstandingRequests = static_cast<uint64_t>(conn->outstanding());
    c.outstandingBytes = conn->outstandingBytes();
    c.lastProgressMonoNs = conn->lastProgressNs();
    c.updatedMonoNs = now;
    blackbox_->writeConnection(conn->blackboxSlot, c);
  }
}

std::string Watchdog::describePeer(const ConnectionRecord& conn) {
  const PeerLink* link = conn.link.load(std::memory_order_acquire);
  std::string s = conn.identity.peer.text[0] != '\0' ? conn.identity.peer.text : "?";
  if (link != nullptr) {
    const bool hello = link->helloSeen.load(std::memory_order_acquire);
    s += " (host " + (hello ? link->host : std::string("?")) + ", pid " +
         std::to_string(link->pid.load(std::memory_order_relaxed)) + ")";
  }
  return s;
}

}  // namespace resilient::net
