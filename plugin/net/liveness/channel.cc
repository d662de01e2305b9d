#include "plugin/net/liveness/channel.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "common/clock.h"
#include "common/log.h"
#include "common/net/interfaces.h"
#include "common/net/socket.h"

namespace resilient::net::liveness {
namespace {

constexpr size_t kMaxPendingOut = 4096;  // a peer that reads nothing gets no more pings
// Accepted links still in their handshake: at most this many at once, each
// for at most this long (a legitimate peer's takes one round trip).
constexpr size_t kMaxInHandshake = 64;
constexpr uint64_t kHandshakeTimeoutNs = 10'000'000'000ull;

bool sameAddress(const SocketAddress& a, const SocketAddress& b) {
  return a.length == b.length && std::memcmp(&a.storage, &b.storage, a.length) == 0;
}

// Liveness links carry small frames that must not wait for Nagle.
constexpr SocketOptions kLinkOptions{};  // TCP_NODELAY

// The event loop's tag for the listener (links are their own tags).
char gListenTag;

}  // namespace

Channel::Channel(ChannelOptions options, const std::set<ConnectionRecord*>& connections,
                 FaultSink& sink)
    : options_(std::move(options)), connections_(connections), sink_(sink) {}

Channel::~Channel() {
  for (auto& link : links_) {
    if (link->fd >= 0) {
      ::close(link->fd);
    }
  }
  if (listenFd_ >= 0) {
    ::close(listenFd_);
  }
}

bool Channel::ensureListener() {
  if (listenFd_ >= 0) {
    return true;
  }
  const SocketAddress& bindAddress = options_.bindAddress;
  if (bindAddress.length == 0) {
    return false;
  }
  Result<FileDescriptor> fd = listenOn(bindAddress, {.backlog = 512, .reuseAddress = false});
  const SocketAddress bound = fd.ok() ? localAddressOf(fd->get()) : SocketAddress{};
  if (bound.length == 0) {
    const int err = fd.ok() ? errno : fd.status().sysErrno();
    RES_WARN(NCCL_NET, "liveness channel: cannot listen on %s: %s; running without it",
             bindAddress.toString().c_str(), errnoText(err).c_str());
    return false;
  }
  if (Status s = events_->add(fd->get(), EventLoop::kReadable, &gListenTag); !s.ok()) {
    RES_WARN(NCCL_NET, "liveness channel: %s; running without it", s.toString().c_str());
    return false;
  }
  listenFd_ = fd->release();
  listenAddress_ = bound;
  RES_INFO(NCCL_NET | NCCL_INIT, "liveness channel listening on %s", bound.toString().c_str());
  return true;
}

uint64_t Channel::newListenNonce() {
  const uint64_t nonce = nextNonce_++;
  listenNonces_.insert(nonce);
  return nonce;
}

bool Channel::trailerFor(uint64_t key, HandleTrailer* out) {
  if (!ensureListener()) {
    return false;
  }
  out->listenNonce = key;
  out->pid = static_cast<uint32_t>(getpid());
  out->liveness = listenAddress_.storage;
  return true;
}

void Channel::forgetListenNonce(uint64_t nonce) {
  // NCCL closes a listen comm right after its accept: connections still
  // waiting for their peer's bind (awaitingBind_) keep the nonce usable.
  listenNonces_.erase(nonce);
  boundNonces_.erase(nonce);
}

void Channel::linkTo(ConnectionRecord& conn, const HandleTrailer& trailer) {
  const SocketAddress peer =
      SocketAddress::fromSockaddr(reinterpret_cast<const sockaddr*>(&trailer.liveness));
  PeerLink* link = nullptr;
  for (auto& l : links_) {
    const PeerState::Phase phase = l->state.phase();
    if (l->outgoing && !l->retired && phase != PeerState::Phase::kDead &&
        phase != PeerState::Phase::kClosed && sameAddress(l->address, peer) &&
        l->state.pid() == trailer.pid) {
      link = l.get();
      break;
    }
  }
  if (link == nullptr) {
    auto fresh = std::make_unique<PeerLink>(options_.policy, PeerLink::Origin::kOutgoing, peer);
    fresh->state.setPid(trailer.pid);
    link = fresh.get();
    links_.push_back(std::move(fresh));
    startConnect(link);
    send(link, link->state.openingHello());
  }
  send(link, makeFrame(Type::kBind, trailer.listenNonce));
  ++link->connections;
  conn.link.store(link, std::memory_order_release);
}

void Channel::awaitLink(ConnectionRecord& conn, uint64_t key) {
  auto it = boundNonces_.find(key);
  if (it != boundNonces_.end()) {
    ++it->second->connections;
    conn.link.store(it->second, std::memory_order_release);
  } else {
    awaitingBind_[key].push_back(&conn);
  }
}

void Channel::detach(ConnectionRecord& conn) {
  for (auto it = awaitingBind_.begin(); it != awaitingBind_.end();) {
    auto& waiting = it->second;
    waiting.erase(std::remove(waiting.begin(), waiting.end(), &conn), waiting.end());
    it = waiting.empty() ? awaitingBind_.erase(it) : std::next(it);
  }
  PeerLink* link = conn.link.exchange(nullptr);
  if (link == nullptr || --link->connections > 0) {
    return;
  }
  if (!link->outgoing && !closingFor_) {
    return;  // incoming links stay open until their initiator closes them
  }
  // An outgoing link whose last connection went; or, while closing because of
  // a fault, an incoming one: its initiator learns at once why we went.
  if (link->state.phase() == PeerState::Phase::kUp) {
    send(link, goodbye());
  }
  closeLink(link);
}

void Channel::sayGoodbyeToAll() {
  for (auto& link : links_) {
    if (link->state.phase() == PeerState::Phase::kUp) {
      send(link.get(), goodbye());
    }
  }
}

void Channel::announce(const RootCause& root, uint64_t commId) {
  if (!announcedComms_.insert(commId).second) {
    return;
  }
  if (!closingFor_) {
    closingFor_ = root;
  }
  const Frame notice = makeFaultNotice(static_cast<uint64_t>(root.cls) + 1, root.pid, root.host,
                                       root.detail, commId);
  notices_.push_back(notice);
  for (size_t i = 0; i < links_.size(); ++i) {  // by index: a failed send changes no vector
    PeerLink* link = links_[i].get();
    // A link still in its handshake gets every notice when it is done.
    if (link->state.phase() == PeerState::Phase::kUp && link->state.authenticated()) {
      send(link, notice);
    }
  }
}

std::optional<RootCause> Channel::peerReasonOf(const ConnectionRecord& conn, uint64_t now) {
  PeerLink* link = conn.link.load(std::memory_order_acquire);
  if (link == nullptr && !awaitingBind_.empty()) {
    // An accepted connection whose peer's bind may wait unread in a link's
    // socket: read every link (by index: reading may close one, adds none).
    for (size_t i = 0; i < links_.size(); ++i) {
      if (links_[i]->fd >= 0) {
        handleLink(links_[i].get(), EventLoop::kReadable, now);
      }
    }
    link = conn.link.load(std::memory_order_acquire);
  }
  if (link == nullptr) {
    return std::nullopt;
  }
  if (link->fd >= 0) {
    handleLink(link, EventLoop::kReadable, now);
  }
  // A notice is about its communicator: an earlier communicator's fault is
  // no reason for this one's (the demo named a rank killed an iteration
  // before as a culprit again).
  if (const auto notice = link->notices.find(conn.commId()); notice != link->notices.end()) {
    return noticeFault(notice->second).root;
  }
  return link->state.peerReason();
}

bool Channel::probe(const ConnectionRecord& conn, uint64_t timeoutNs) {
  PeerLink* link = conn.link.load(std::memory_order_acquire);
  if (link == nullptr || link->fd < 0 || link->state.phase() != PeerState::Phase::kUp ||
      !link->state.authenticated()) {
    return false;
  }
  const Frame ping = link->state.probe();
  send(link, ping);
  const uint64_t deadline = monotonicNs() + timeoutNs;
  while (link->fd >= 0 && link->state.phase() == PeerState::Phase::kUp) {
    if (link->state.answered(ping.value)) {
      return true;
    }
    const uint64_t now = monotonicNs();
    if (now >= deadline) {
      return false;
    }
    // Every link is read meanwhile, as the watchdog thread (held up by this
    // call) would: the peer may be this very process (its end of the link
    // answers the ping).
    std::vector<pollfd> fds;
    std::vector<PeerLink*> polled;
    for (const auto& l : links_) {
      if (l->fd >= 0 && !l->retired) {
        fds.push_back({l->fd, POLLIN, 0});
        polled.push_back(l.get());
      }
    }
    const int waitMs = static_cast<int>((deadline - now + 999999) / 1000000);
    if (::poll(fds.data(), fds.size(), waitMs) > 0) {
      for (size_t i = 0; i < fds.size(); ++i) {
        if ((fds[i].revents & (POLLIN | POLLERR | POLLHUP)) != 0 && polled[i]->fd >= 0) {
          handleLink(polled[i], EventLoop::kReadable, monotonicNs());
        }
      }
    }
  }
  return false;
}

Frame Channel::goodbye() const {
  if (!closingFor_) {
    return makeGoodbye();
  }
  return makeGoodbye(static_cast<uint64_t>(closingFor_->cls) + 1, closingFor_->pid,
                     closingFor_->host, closingFor_->detail);
}

void Channel::closeLink(PeerLink* link) {
  if (link->fd >= 0) {
    events_->remove(link->fd);
    ::close(link->fd);
    link->fd = -1;
  }
  for (auto it = boundNonces_.begin(); it != boundNonces_.end();) {
    it = it->second == link ? boundNonces_.erase(it) : std::next(it);
  }
  link->state.closed();
  if (link->connections <= 0) {
    link->retired = true;
  }
}

void Channel::reap() {
  links_.erase(
      std::remove_if(links_.begin(), links_.end(), [](const auto& l) { return l->retired; }),
      links_.end());
}

void Channel::startConnect(PeerLink* link) {
  Result<FileDescriptor> fd = openStreamSocket(link->address.family());
  if (!fd.ok()) {
    markDead(link, "liveness channel: socket: " + errnoText(fd.status().sysErrno()));
    return;
  }
  link->fd = fd->release();
  (void)applySocketOptions(link->fd, kLinkOptions);
  const int err = resilient::startConnect(link->fd, link->address);
  if (err != 0 && err != EINPROGRESS) {
    markDead(link,
             "liveness channel to " + link->state.addressText() + ": connect: " + errnoText(err));
    return;
  }
  if (Status s = events_->add(link->fd, EventLoop::kReadable | EventLoop::kWritable, link);
      !s.ok()) {
    markDead(link, "liveness channel to " + link->state.addressText() + ": " + s.toString());
  }
}

void Channel::updateInterest(PeerLink* link) {
  if (link->fd < 0) {
    return;
  }
  const bool wantWrite = !link->out.empty() || link->state.phase() == PeerState::Phase::kConnecting;
  (void)events_->modify(link->fd, EventLoop::kReadable | (wantWrite ? EventLoop::kWritable : 0u),
                        link);
}

void Channel::send(PeerLink* link, const Frame& frame) {
  if (link->fd < 0 || link->state.phase() == PeerState::Phase::kDead) {
    return;
  }
  if (frame.type == Type::kPing && link->out.size() > kMaxPendingOut) {
    return;
  }
  const bool handshake = frame.type == Type::kHello || frame.type == Type::kChallenge ||
                         frame.type == Type::kProof || frame.type == Type::kRefused;
  if (!handshake && !link->state.authenticated()) {
    // Nothing but the handshake before both sides proved the job token: the
    // rest waits (binds, goodbyes, notices); pings would say nothing.
    if (frame.type != Type::kPing) {
      encode(frame, &link->held);
    }
    return;
  }
  encode(frame, &link->out);
  flush(link);
}

void Channel::flush(PeerLink* link) {
  while (!link->out.empty() && link->fd >= 0 &&
         link->state.phase() != PeerState::Phase::kConnecting) {
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
    markDead(link,
             "liveness channel to " + link->state.addressText() + ": send: " + errnoText(errno));
    return;
  }
  updateInterest(link);
}

void Channel::markDead(PeerLink* link, const std::string& reason) {
  if (!link->state.die(reason)) {
    return;  // dead already
  }
  if (link->fd >= 0) {
    events_->remove(link->fd);
    ::close(link->fd);
    link->fd = -1;
  }
  link->out.clear();
  failBusy(connections_, *link, link->state.deathFault(), sink_);
  if (link->connections <= 0) {
    closeLink(link);
  }
}

void Channel::handleListener(uint64_t now) {
  while (true) {
    SocketAddress peer;
    FileDescriptor fd = acceptConnection(listenFd_, &peer);
    if (!fd.valid()) {
      return;  // EAGAIN, or a transient error: the listener stays armed
    }
    (void)applySocketOptions(fd.get(), kLinkOptions);
    auto link = std::make_unique<PeerLink>(options_.policy, PeerLink::Origin::kAccepted, peer);
    if (!events_->add(fd.get(), EventLoop::kReadable, link.get()).ok()) {
      continue;  // closed by FileDescriptor
    }
    makeRoomForHandshake(now);
    link->fd = fd.release();
    link->state.opened(now);
    link->openedNs = now;
    links_.push_back(std::move(link));
    // The opener speaks first (its hello); we answer with our challenge.
  }
}

std::vector<PeerLink*> Channel::inHandshake() const {
  std::vector<PeerLink*> out;
  for (const auto& l : links_) {
    if (!l->outgoing && !l->retired && l->fd >= 0 && !l->state.authenticated()) {
      out.push_back(l.get());
    }
  }
  return out;
}

void Channel::dropUnauthenticated(PeerLink* link, const char* why, uint64_t now) {
  RES_WARN_LIMITED(warnLimiter_, now, NCCL_NET,
                   "liveness channel from %s: %s; dropped (a process that cannot prove the job "
                   "token holds nothing here)",
                   link->state.addressText().c_str(), why);
  closeLink(link);
}

void Channel::makeRoomForHandshake(uint64_t now) {
  // Connections that have not proved the job token never keep a peer out:
  // the oldest of them goes, one that has sent nothing first.
  const std::vector<PeerLink*> pending = inHandshake();
  if (pending.size() < kMaxInHandshake) {
    return;
  }
  PeerLink* victim = pending.front();
  for (PeerLink* l : pending) {
    const bool silent = !l->state.helloReceived();
    if (silent != !victim->state.helloReceived() ? silent : l->openedNs < victim->openedNs) {
      victim = l;
    }
  }
  dropUnauthenticated(victim, "too many connections in their handshake", now);
}

void Channel::onEvent(void* tag, uint32_t events, uint64_t now) {
  if (tag == &gListenTag) {
    handleListener(now);
    return;
  }
  auto* link = static_cast<PeerLink*>(tag);
  const bool alive = std::any_of(links_.begin(), links_.end(),
                                 [link](const auto& l) { return l.get() == link && !l->retired; });
  if (alive) {
    handleLink(link, events, now);
  }
}

void Channel::handleLink(PeerLink* link, uint32_t events, uint64_t now) {
  if (link->state.phase() == PeerState::Phase::kConnecting &&
      (events & (EventLoop::kWritable | EventLoop::kErrorOrHangup)) != 0) {
    if (const auto death = link->state.connectFinished(pendingSocketError(link->fd), now)) {
      markDead(link, *death);
      return;
    }
  }
  if ((events & EventLoop::kWritable) != 0) {
    flush(link);
  }
  if ((events & (EventLoop::kReadable | EventLoop::kErrorOrHangup)) == 0 || link->fd < 0) {
    return;
  }
  int error = 0;
  std::string invalid;
  const ReadEnd end = readFrames(link->fd, link->decoder, &error, &invalid, [&](const Frame& f) {
    onFrame(link, f, now);
    return link->fd >= 0;
  });
  if (end == ReadEnd::kInvalid) {
    RES_WARN(NCCL_NET, "liveness channel from %s: %s; dropping the connection",
             link->state.addressText().c_str(), invalid.c_str());
    markDead(link, "liveness channel from " + link->state.addressText() +
                       " sent invalid data: " + invalid);
  } else if (end == ReadEnd::kEndOfStream) {
    if (const auto death = link->state.endOfStream(error)) {
      markDead(link, *death);
    } else {
      closeLink(link);  // orderly: goodbye, then EOF
    }
  }
}

void Channel::onFrame(PeerLink* link, const Frame& frame, uint64_t now) {
  const bool wasAuthenticated = link->state.authenticated();
  const PeerState::Reaction r = link->state.received(frame, now);
  if (frame.type == Type::kBind) {
    bind(link, frame.value);
  }
  if (r.reply) {
    send(link, *r.reply);
  }
  if (r.death) {
    if (frame.type == Type::kRefused || (r.reply && r.reply->type == Type::kRefused)) {
      RES_WARN_LIMITED(warnLimiter_, now, NCCL_NET, "liveness channel: %s", r.death->c_str());
    }
    if (!link->outgoing && !wasAuthenticated) {
      closeLink(link);  // a stranger: nothing of ours used the link
    } else {
      markDead(link, *r.death);
    }
    return;
  }
  if (!wasAuthenticated && link->state.authenticated()) {
    // What waited for the handshake: this side's frames, then the fault
    // notices announced so far (a fault found while the link was being made).
    link->out += link->held;
    link->held.clear();
    for (const Frame& notice : notices_) {
      encode(notice, &link->out);
    }
    flush(link);
  }
  if (frame.type == Type::kGoodbye) {
    // Requests outstanding to a peer that closed its side never complete.
    failBusy(connections_, *link, link->state.closedFault(), sink_);
  } else if (frame.type == Type::kFault && frame.value != 0) {
    // The peer's side of that communicator goes down (NCCL errors it, the
    // program aborts it): what we wait for from it there never comes, now
    // (failBusy) or when a connection of it turns busy later (deathOf).
    link->notices.emplace(frame.commId, frame);
    failBusy(connections_, *link, noticeFault(frame), sink_, frame.commId);
  }
}

void Channel::bind(PeerLink* link, uint64_t nonce) {
  const bool open = listenNonces_.count(nonce) != 0;
  if (link->outgoing || (!open && awaitingBind_.count(nonce) == 0)) {
    return;  // not one of our listen comms (closed, and nobody waits for it)
  }
  if (open) {
    boundNonces_[nonce] = link;
  }
  auto waiting = awaitingBind_.find(nonce);
  if (waiting != awaitingBind_.end()) {
    for (ConnectionRecord* conn : waiting->second) {
      ++link->connections;
      conn->link.store(link, std::memory_order_release);
    }
    awaitingBind_.erase(waiting);
  }
}

void Channel::tick(uint64_t now) {
  for (PeerLink* link : inHandshake()) {
    if (now > link->openedNs + kHandshakeTimeoutNs) {
      dropUnauthenticated(link, "no complete handshake within 10 s", now);
    }
  }
  // By index: a send that breaks a link changes it, but adds no link.
  for (size_t i = 0; i < links_.size(); ++i) {
    PeerLink* link = links_[i].get();
    const bool busy = link->busy && !link->retired;
    link->busy = false;
    const PeerState::Tick t = link->state.tick(now, busy);
    if (t.ping) {
      send(link, *t.ping);
    }
    if (t.silentNs) {
      const std::optional<net::LinkState> local = net::linkStateOf(localAddressOf(link->fd));
      failBusy(connections_, *link, link->state.silenceFault(*t.silentNs, local), sink_);
    }
  }
  reap();
}

}  // namespace resilient::net::liveness
