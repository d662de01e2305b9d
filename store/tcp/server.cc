#include "store/tcp/server.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <queue>
#include <unordered_map>
#include <vector>

#include "common/log.h"
#include "common/net/event_loop.h"
#include "common/net/socket.h"
#include "common/status.h"
#include "store/engine.h"
#include "store/tcp/frame_decoder.h"
#include "store/tcp/hello_check.h"
#include "store/tcp/request_handler.h"
#include "store/tcp/send_pool.h"

namespace resilient::store::tcp {
namespace {

// Connection ids, for log lines and handshake timers.
constexpr uint64_t kFirstConnId = 1;
constexpr size_t kReadChunk = size_t{64} * 1024;
constexpr int kMaxReadsPerEvent = 16;
// A connection whose unsent replies exceed this stops being read until the
// peer catches up.
constexpr size_t kPauseReadingAt = 16u << 20;
// Write bursts at least this large are spread over the send pool.
constexpr size_t kParallelSendMin = 256;

// Replies a send-pool thread takes from a burst at a time.
constexpr size_t kSendChunk = 64;
// How long after a barrier release the engine's bookkeeping of its waiters
// waits (StoreEngine::reap): out of the way of the replies still in flight.
constexpr auto kReapDelay = std::chrono::seconds(1);

uint64_t nowNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now().time_since_epoch())
          .count());
}

}  // namespace

class StoreServer::Service {
 public:
  explicit Service(ServerOptions options);
  ~Service();
  void run();
  void requestStop();

  uint16_t port() const noexcept { return port_; }
  const std::string& address() const noexcept { return address_; }
  uint64_t instanceId() const noexcept { return instanceId_; }
  ServerStats stats() const;

 private:
  enum class State {
    kHello,    // waiting for the client's Hello
    kReady,    // serving requests
    kClosing,  // flushing a final reply (refusal), then closing
  };
  // A connection. Its address is its handle: the event loop's tag, the engine's
  // owner id and the dirty list hold Conn*; a closed Conn is kept (in
  // graveyard_) until the end of the loop iteration, so none of those can
  // dangle while the iteration runs.
  struct Conn {
    uint64_t id = 0;  // for log lines and handshake timers
    FileDescriptor fd;
    bool closed = false;
    State state = State::kHello;
    FrameDecoder decoder{kDefaultMaxFrameBytes, FrameKind::kRequest};
    std::string out;
    size_t outOffset = 0;
    bool writeArmed = false;
    bool readPaused = false;
    bool dirty = false;
    // Held by a send-pool thread while it appends to and writes `out` (a
    // connection can have several replies in one burst).
    std::mutex sending;
    std::string peer;  // address, then "address (client name)"
  };
  struct Timer {
    TimePoint when;
    uint64_t id = 0;
    bool handshake = false;  // id is a connection; else an engine pending id
    bool operator>(const Timer& o) const { return when > o.when; }
  };

  void acceptAll(TimePoint now);
  void onReadable(Conn& c, TimePoint now);
  void process(Conn& c, TimePoint now);
  void onHello(Conn& c, const Hello& hello);
  void flush(Conn& c);
  // Writes what `c` has pending without blocking: 0 when all of it went,
  // EAGAIN when the socket is full, else the errno. Touches only `c`, so the
  // send pool may run it on other threads for disjoint connections.
  static int trySend(Conn& c);
  // The event-loop side of a write: read/write interest, closing, unpausing.
  void afterSend(Conn& c, int result);
  // Writes every reply produced this iteration: the dirty connections' and
  // the barrier releases' (encoded here, in parallel with their sends).
  void flushDirty();
  // A send-pool thread's share of the burst: chunks of it until none is left.
  // Connections whose write needs the loop thread (a full socket, an error,
  // closing, interest to restore) go to `followUp`.
  void sendChunks(std::vector<Conn*>& followUp);
  // trySend plus the bookkeeping a send-pool thread may do itself; false
  // when the loop thread has to finish with afterSend.
  static bool sendAndSettle(Conn& c);
  // Forgets a fully written `out` (its memory too, when it grew large).
  static void clearOut(Conn& c);
  void markDirty(Conn& c);
  void updateEvents(Conn& c);
  void closeConn(Conn& c);
  void refuse(Conn& c, HelloStatus status);
  void runTimers(TimePoint now);
  int pollTimeoutMs(TimePoint now) const;
  void onCompletion(const Completion& c);

  ServerOptions options_;
  uint64_t instanceId_;
  EventLoop events_{1024};
  FileDescriptor listen_;
  FileDescriptor spare_;  // closed to accept-and-drop when out of descriptors
  uint16_t port_ = 0;
  std::string address_;
  std::atomic<bool> stop_{false};

  StoreEngine engine_;
  RequestHandler handler_;
  std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns_;  // by id
  std::vector<std::unique_ptr<Conn>> graveyard_;               // closed this iteration
  uint64_t nextConnId_ = kFirstConnId;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<>> timers_;
  std::vector<Conn*> dirty_;
  std::vector<char> scratch_;
  std::unique_ptr<SendPool> sendPool_;
  std::vector<Conn*> burst_;
  // A barrier release's reply to one waiter, not yet written.
  struct ReleaseReply {
    Conn* conn = nullptr;
    uint64_t tag = 0;
    BarrierResult result;
  };
  std::vector<ReleaseReply> releases_;  // handed over by the engine this iteration
  std::vector<ReleaseReply> releasing_;
  size_t burstReplies_ = 0;
  std::atomic<size_t> burstCursor_{0};
  std::vector<std::vector<Conn*>> followUp_;  // one per send-pool part
  std::optional<TimePoint> reapAt_;

  log::RateLimiter refuseLimiter_;
  log::RateLimiter acceptLimiter_;

  std::atomic<uint64_t> statOpen_{0};
  std::atomic<uint64_t> statAccepted_{0};
  std::atomic<uint64_t> statToken_{0};
  std::atomic<uint64_t> statProtocol_{0};
  std::atomic<uint64_t> statBusy_{0};
  std::atomic<uint64_t> statRequests_{0};
};

StoreServer::Service::Service(ServerOptions options)
    : options_(std::move(options)),
      instanceId_(randomInstanceId()),
      engine_([this](const Completion& c) { onCompletion(c); },
              [this](const std::vector<BarrierWaiter>& waiters, uint32_t arrived) {
                // A waiter's owner is a Conn of this loop: closing one drops
                // its waiters, and one closed after the release is still in
                // graveyard_ until the replies are written.
                for (const BarrierWaiter& w : waiters) {
                  releases_.push_back(ReleaseReply{
                      reinterpret_cast<Conn*>(w.owner),  // NOLINT(performance-no-int-to-ptr)
                      w.tag, BarrierResult{true, w.arrivalIndex, arrived}});
                }
              }),
      handler_(engine_, options_.maxFrameBytes),
      scratch_(kReadChunk) {
  int helpers = options_.sendThreads;
  if (helpers < 0) {
    const int cpus = static_cast<int>(std::thread::hardware_concurrency());
    helpers = std::clamp(cpus - 1, 0, 3);
  }
  sendPool_ = std::make_unique<SendPool>(helpers);
  followUp_.resize(static_cast<size_t>(sendPool_->parts()));
  spare_ = FileDescriptor(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (Status s = events_.status(); !s.ok()) {
    throwStatus(s);
  }
  if (options_.adoptListenFd >= 0) {
    listen_ = FileDescriptor(options_.adoptListenFd);
    (void)setNonBlocking(listen_.get());
  } else {
    const std::vector<SocketAddress> addrs =
        valueOrThrow(resolveAll(options_.host, options_.port, AddressUse::kListen));
    // The kernel caps the backlog at net.core.somaxconn.
    listen_ = valueOrThrow(listenOn(addrs.front(), {.backlog = 65535, .reuseAddress = true}));
  }
  const SocketAddress bound = localAddressOf(listen_.get());
  port_ = bound.port();
  address_ = bound.toString();
  (void)events_.add(listen_.get(), EventLoop::kReadable, &listen_);
}

StoreServer::Service::~Service() = default;

ServerStats StoreServer::Service::stats() const {
  ServerStats s;
  s.connectionsOpen = statOpen_.load(std::memory_order_relaxed);
  s.connectionsAccepted = statAccepted_.load(std::memory_order_relaxed);
  s.refusedToken = statToken_.load(std::memory_order_relaxed);
  s.refusedProtocol = statProtocol_.load(std::memory_order_relaxed);
  s.refusedBusy = statBusy_.load(std::memory_order_relaxed);
  s.requests = statRequests_.load(std::memory_order_relaxed);
  return s;
}

void StoreServer::Service::requestStop() {
  stop_.store(true);
  events_.wake();
}

int StoreServer::Service::pollTimeoutMs(TimePoint now) const {
  std::optional<TimePoint> next;
  if (!timers_.empty()) {
    next = timers_.top().when;
  }
  if (auto k = engine_.nextKeyExpiry(); k && (!next || *k < *next)) {
    next = k;
  }
  if (reapAt_ && (!next || *reapAt_ < *next)) {
    next = reapAt_;
  }
  if (!next) {
    return -1;
  }
  if (*next <= now) {
    return 0;
  }
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(*next - now).count();
  return static_cast<int>(std::min<int64_t>((us + 999) / 1000, 60000));
}

void StoreServer::Service::run() {
  RES_INFO(log::kStore, "store server %s listening on %s (token %s)",
           std::to_string(instanceId_).c_str(), address_.c_str(),
           options_.token.empty() ? "not checked" : "required");
  while (!stop_.load(std::memory_order_relaxed)) {
    const TimePoint before = SteadyClock::now();
    std::optional<TimePoint> now;  // read once, after the wait
    const Result<int> n = events_.wait(pollTimeoutMs(before), [&](void* tag, uint32_t what) {
      if (!now) {
        now = SteadyClock::now();
      }
      if (tag == &listen_) {
        acceptAll(*now);
        return;
      }
      Conn& c = *static_cast<Conn*>(tag);
      if (c.closed) {
        return;
      }
      if ((what & EventLoop::kWritable) != 0) {
        flush(c);
        if (c.closed) {
          return;
        }
      }
      if ((what & (EventLoop::kReadable | EventLoop::kErrorOrHangup)) != 0) {
        onReadable(c, *now);
      }
    });
    if (!n.ok()) {
      RES_WARN(log::kStore, "store server %s: %s", address_.c_str(), n.status().toString().c_str());
      break;
    }
    runTimers(SteadyClock::now());
    flushDirty();
    graveyard_.clear();
    if (reapAt_ && *reapAt_ <= SteadyClock::now()) {
      engine_.reap();
      reapAt_.reset();
    }
  }
  RES_INFO(log::kStore, "store server %s stopping: closing %zu connections", address_.c_str(),
           conns_.size());
  conns_.clear();
  graveyard_.clear();
  statOpen_.store(0);
}

void StoreServer::Service::acceptAll(TimePoint now) {
  for (;;) {
    FileDescriptor owned = acceptConnection(listen_.get());
    const int fd = owned.get();
    if (fd < 0) {
      if (errno == ECONNABORTED) {
        continue;
      }
      if (errno == EMFILE || errno == ENFILE) {
        // Out of descriptors: accept with the spare one and drop, so the
        // pending connection gets an error rather than spinning the loop.
        statBusy_.fetch_add(1, std::memory_order_relaxed);
        RES_WARN_LIMITED(acceptLimiter_, nowNs(), log::kStore,
                         "store server %s: out of file descriptors with %zu connections; "
                         "refusing new ones (raise the fd limit: ulimit -n)",
                         address_.c_str(), conns_.size());
        spare_.reset();
        acceptConnection(listen_.get()).reset();
        spare_ = FileDescriptor(::open("/dev/null", O_RDONLY | O_CLOEXEC));
        return;
      }
      return;  // EAGAIN: no more pending connections
    }
    statAccepted_.fetch_add(1, std::memory_order_relaxed);
    if (conns_.size() >= options_.maxConnections) {
      statBusy_.fetch_add(1, std::memory_order_relaxed);
      std::string reply;
      encodeHelloReply(HelloReply{kVersion, HelloStatus::kBusy, instanceId_,
                                  static_cast<uint32_t>(options_.maxFrameBytes)},
                       &reply);
      [[maybe_unused]] ssize_t w = ::send(fd, reply.data(), reply.size(), MSG_NOSIGNAL);
      RES_WARN_LIMITED(acceptLimiter_, nowNs(), log::kStore,
                       "store server %s: connection limit %zu reached; refusing a client",
                       address_.c_str(), options_.maxConnections);
      continue;
    }
    (void)applySocketOptions(fd, kConnectionOptions);
    const uint64_t id = nextConnId_++;
    auto owned_conn = std::make_unique<Conn>();
    Conn& c = *owned_conn;
    c.id = id;
    c.fd = std::move(owned);
    c.decoder.setMaxFrameBytes(options_.maxFrameBytes);
    c.peer = peerAddressOf(fd).toString();
    if (!events_.add(fd, EventLoop::kReadable, &c).ok()) {
      continue;
    }
    conns_.emplace(id, std::move(owned_conn));
    statOpen_.store(conns_.size(), std::memory_order_relaxed);
    timers_.push(Timer{now + options_.handshakeTimeout, id, true});
  }
}

void StoreServer::Service::onReadable(Conn& c, TimePoint now) {
  const size_t pendingBefore = c.out.size() - c.outOffset;
  for (int i = 0; i < kMaxReadsPerEvent; ++i) {
    const ssize_t n = ::recv(c.fd.get(), scratch_.data(), scratch_.size(), 0);
    if (n > 0) {
      c.decoder.feed(std::string_view(scratch_.data(), static_cast<size_t>(n)));
      process(c, now);
      if (c.closed || c.readPaused || c.state == State::kClosing) {
        return;
      }
      if (static_cast<size_t>(n) < scratch_.size()) {
        break;  // drained; the level-triggered event loop reports any later bytes
      }
      continue;
    }
    if (n == 0) {
      closeConn(c);
      return;
    }
    if (errno == EINTR) {
      continue;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      closeConn(c);
      return;
    }
    break;
  }
  // ACKs: a request answered now has its ACK ride on the reply (delay it);
  // one that waits (wait, barrier) is ACKed now, rather than by thousands of
  // delayed-ACK timers firing together later, in the middle of a release.
  setQuickAck(c.fd.get(), c.out.size() - c.outOffset == pendingBefore);
  c.decoder.shrinkIfEmpty();
}

void StoreServer::Service::process(Conn& c, TimePoint now) {
  try {
    if (c.state == State::kHello) {
      std::optional<Hello> hello = c.decoder.nextHello();
      if (!hello) {
        return;
      }
      onHello(c, *hello);
      if (c.state != State::kReady) {
        return;
      }
    }
    while (c.state == State::kReady && !c.readPaused) {
      std::optional<Frame> frame = c.decoder.next();
      if (!frame) {
        break;
      }
      statRequests_.fetch_add(1, std::memory_order_relaxed);
      const size_t before = c.out.size();
      std::optional<RequestHandler::Deferred> d =
          handler_.handle(reinterpret_cast<uint64_t>(&c), *frame, now, &c.out);
      if (d) {
        timers_.push(Timer{d->deadline, d->pendingId, false});
      }
      if (c.out.size() != before) {
        markDirty(c);
      }
      if (c.out.size() - c.outOffset > kPauseReadingAt) {
        c.readPaused = true;
        updateEvents(c);
      }
    }
  } catch (const ProtocolError& e) {
    statProtocol_.fetch_add(1, std::memory_order_relaxed);
    RES_WARN_LIMITED(refuseLimiter_, nowNs(), log::kStore,
                     "store server %s: dropping client %s: %s", address_.c_str(), c.peer.c_str(),
                     e.what());
    // Replies to the well-formed requests before the bad one still go out
    // (best effort, without waiting), then the connection closes.
    if (c.outOffset < c.out.size()) {
      [[maybe_unused]] ssize_t n = ::send(c.fd.get(), c.out.data() + c.outOffset,
                                          c.out.size() - c.outOffset, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    closeConn(c);
  }
}

void StoreServer::Service::onHello(Conn& c, const Hello& hello) {
  if (!hello.name.empty()) {
    c.peer += " (" + hello.name + ")";
  }
  const HelloStatus status = checkHello(hello, options_.token);
  if (status == HelloStatus::kVersionUnsupported) {
    statProtocol_.fetch_add(1, std::memory_order_relaxed);
    RES_WARN_LIMITED(refuseLimiter_, nowNs(), log::kStore,
                     "store server %s: refusing client %s: protocol version %u, this server "
                     "speaks %u",
                     address_.c_str(), c.peer.c_str(), hello.version, kVersion);
    refuse(c, HelloStatus::kVersionUnsupported);
    return;
  }
  if (status == HelloStatus::kTokenRefused) {
    statToken_.fetch_add(1, std::memory_order_relaxed);
    RES_WARN_LIMITED(refuseLimiter_, nowNs(), log::kStore,
                     "store server %s: refusing client %s: wrong job token", address_.c_str(),
                     c.peer.c_str());
    refuse(c, HelloStatus::kTokenRefused);
    return;
  }
  encodeHelloReply(HelloReply{kVersion, HelloStatus::kOk, instanceId_,
                              static_cast<uint32_t>(options_.maxFrameBytes)},
                   &c.out);
  c.state = State::kReady;
  markDirty(c);
}

void StoreServer::Service::refuse(Conn& c, HelloStatus status) {
  encodeHelloReply(
      HelloReply{kVersion, status, instanceId_, static_cast<uint32_t>(options_.maxFrameBytes)},
      &c.out);
  c.state = State::kClosing;
  updateEvents(c);
  markDirty(c);
}

void StoreServer::Service::markDirty(Conn& c) {
  if (!c.dirty) {
    c.dirty = true;
    dirty_.push_back(&c);
  }
}

void StoreServer::Service::flushDirty() {
  // Swap first: flushing may close connections but never adds to dirty_.
  burst_.clear();
  burst_.swap(dirty_);
  releasing_.clear();
  releasing_.swap(releases_);
  for (Conn* c : burst_) {
    c->dirty = false;
  }
  // The burst's replies, numbered: the dirty connections', then the releases'.
  burstReplies_ = burst_.size() + releasing_.size();
  burstCursor_.store(0, std::memory_order_relaxed);
  if (burstReplies_ >= kParallelSendMin) {
    sendPool_->run([this](size_t part) { sendChunks(followUp_[part]); });
  } else {
    sendChunks(followUp_[0]);
  }
  // Back on the loop thread alone: closing and event-loop changes for what the
  // send-pool threads could not settle.
  for (std::vector<Conn*>& list : followUp_) {
    for (Conn* c : list) {
      if (!c->closed) {
        flush(*c);
      }
    }
    list.clear();
  }
  burst_.clear();
  if (!releasing_.empty() && !reapAt_) {
    reapAt_ = SteadyClock::now() + kReapDelay;
  }
  releasing_.clear();
}

bool StoreServer::Service::sendAndSettle(Conn& c) {
  if (trySend(c) != 0 || c.state != State::kReady || c.writeArmed || c.readPaused) {
    return false;
  }
  clearOut(c);
  return true;
}

void StoreServer::Service::clearOut(Conn& c) {
  c.out.clear();
  c.outOffset = 0;
  if (c.out.capacity() > size_t{64} * 1024) {
    std::string().swap(c.out);
  }
}

void StoreServer::Service::sendChunks(std::vector<Conn*>& followUp) {
  for (;;) {
    const size_t begin = burstCursor_.fetch_add(kSendChunk, std::memory_order_relaxed);
    if (begin >= burstReplies_) {
      return;
    }
    const size_t end = std::min(begin + kSendChunk, burstReplies_);
    for (size_t i = begin; i < end; ++i) {
      const ReleaseReply* reply = i < burst_.size() ? nullptr : &releasing_[i - burst_.size()];
      Conn& c = reply == nullptr ? *burst_[i] : *reply->conn;
      if (c.closed) {
        continue;
      }
      std::lock_guard<std::mutex> lock(c.sending);
      if (reply != nullptr) {
        encodeBarrierRelease(reply->tag, reply->result, &c.out);
      }
      if (!sendAndSettle(c)) {
        followUp.push_back(&c);
      }
    }
  }
}

int StoreServer::Service::trySend(Conn& c) {
  while (c.outOffset < c.out.size()) {
    const ssize_t n = ::send(c.fd.get(), c.out.data() + c.outOffset, c.out.size() - c.outOffset,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c.outOffset += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return EAGAIN;
    }
    return n < 0 ? errno : EPIPE;
  }
  return 0;
}

void StoreServer::Service::flush(Conn& c) {
  afterSend(c, trySend(c));
}

void StoreServer::Service::afterSend(Conn& c, int result) {
  if (result == EAGAIN) {
    if (!c.writeArmed) {
      c.writeArmed = true;
      updateEvents(c);
    }
    return;
  }
  if (result != 0) {
    closeConn(c);
    return;
  }
  clearOut(c);
  if (c.state == State::kClosing) {
    closeConn(c);
    return;
  }
  if (c.writeArmed || c.readPaused) {
    c.writeArmed = false;
    if (c.readPaused) {
      c.readPaused = false;
      updateEvents(c);
      // Frames may be buffered already; process them without waiting for more bytes.
      process(c, SteadyClock::now());
      return;
    }
    updateEvents(c);
  }
}

void StoreServer::Service::updateEvents(Conn& c) {
  const bool reading = !c.readPaused && c.state != State::kClosing;
  (void)events_.modify(
      c.fd.get(),
      (reading ? EventLoop::kReadable : 0u) | (c.writeArmed ? EventLoop::kWritable : 0u), &c);
}

void StoreServer::Service::closeConn(Conn& c) {
  if (c.closed) {
    return;
  }
  c.closed = true;
  engine_.dropOwner(reinterpret_cast<uint64_t>(&c));
  c.fd.reset();  // leaves the event loop
  auto it = conns_.find(c.id);
  if (it != conns_.end()) {
    graveyard_.push_back(std::move(it->second));
    conns_.erase(it);
  }
  statOpen_.store(conns_.size(), std::memory_order_relaxed);
}

void StoreServer::Service::runTimers(TimePoint now) {
  engine_.expireKeys(now);
  while (!timers_.empty() && timers_.top().when <= now) {
    const Timer t = timers_.top();
    timers_.pop();
    if (t.handshake) {
      auto it = conns_.find(t.id);
      if (it != conns_.end() && it->second->state == State::kHello) {
        statProtocol_.fetch_add(1, std::memory_order_relaxed);
        RES_WARN_LIMITED(refuseLimiter_, nowNs(), log::kStore,
                         "store server %s: dropping client %s: no handshake within %lld ms",
                         address_.c_str(), it->second->peer.c_str(),
                         static_cast<long long>(options_.handshakeTimeout.count()));
        closeConn(*it->second);
      }
    } else {
      engine_.expire(t.id);
    }
  }
}

void StoreServer::Service::onCompletion(const Completion& c) {
  // The owner is a live Conn: closing one drops its pending calls first.
  Conn& conn = *reinterpret_cast<Conn*>(
      c.owner);  // NOLINT(performance-no-int-to-ptr): owner ids are Conn addresses
  handler_.encodeCompletion(c, &conn.out);
  markDirty(conn);
}

StoreServer::StoreServer(ServerOptions options)
    : service_(std::make_unique<Service>(std::move(options))) {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "store-loop");
    service_->run();
  });
}

StoreServer::~StoreServer() {
  stop();
}

void StoreServer::stop() {
  if (thread_.joinable()) {
    service_->requestStop();
    thread_.join();
  }
}

uint16_t StoreServer::port() const noexcept {
  return service_->port();
}

std::string StoreServer::address() const {
  return service_->address();
}

ServerStats StoreServer::stats() const {
  return service_->stats();
}

uint64_t StoreServer::instanceId() const noexcept {
  return service_->instanceId();
}

}  // namespace resilient::store::tcp
