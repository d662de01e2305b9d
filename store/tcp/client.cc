#include "store/tcp/client.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <thread>
#include <unordered_map>

#include "common/clock.h"
#include "common/log.h"
#include "common/net/socket.h"
#include "common/status.h"
#include "store/backoff.h"
#include "store/errors.h"
#include "store/tcp/frame_decoder.h"

namespace resilient::store::tcp {
namespace {

// Longest single connect attempt (SYN retransmits, a slow handshake).
constexpr Millis kMaxAttempt{10000};

// A store deadline on the monotonic clock of the common socket helpers.
uint64_t deadlineNs(TimePoint deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - SteadyClock::now());
  return monotonicNs() + static_cast<uint64_t>(std::max<int64_t>(left.count(), 0));
}

// Extra time the client gives a server-timed call (wait, barrier) beyond the
// caller's timeout before deciding the server is not answering at all.
Millis graceFor(Millis timeout) {
  return Millis(500) + timeout / 20;
}

// A request on a list of keys (multiGet, check, wait), each key checked.
// A list longer than a frame may carry (the server's decoder refuses it as
// a protocol error, dropping the connection) is refused before sending.
void checkItems(Op op, size_t n) {
  if (n > kMaxItemsPerFrame) {
    throw InvalidArgument(std::string(opName(op)) + " of " + std::to_string(n) +
                          " items exceeds the limit of " + std::to_string(kMaxItemsPerFrame) +
                          " per request");
  }
}
// A barrierRanks frame carries at most a barrier's world of ranks (checkBarrier).
static_assert(static_cast<size_t>(kMaxBarrierWorld) <= kMaxItemsPerFrame);

StoreRequest keysRequest(Op op, const std::vector<std::string>& keys) {
  checkItems(op, keys.size());
  for (const auto& k : keys) {
    checkKey(k);
  }
  StoreRequest req;
  req.op = op;
  req.keys = keys;
  return req;
}

}  // namespace

// One established connection: the socket, its reader thread and the calls
// awaiting replies on it. Once broken it stays broken; the client makes a new one.
class TcpStoreClient::ServerConnection {
 public:
  struct Call {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    bool lost = false;
    std::string lostReason;
    Response resp;
  };

  ServerConnection(FileDescriptor fd, uint64_t instance, size_t maxFrame, std::string target)
      : fd_(std::move(fd)), instance_(instance), maxFrame_(maxFrame), target_(std::move(target)) {
    reader_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "store-reader");
      readLoop();
    });
  }
  ~ServerConnection() {
    fail("client closed");
    if (reader_.joinable()) {
      reader_.join();
    }
  }
  ServerConnection(const ServerConnection&) = delete;
  ServerConnection& operator=(const ServerConnection&) = delete;

  uint64_t instance() const noexcept { return instance_; }
  // A blocking call's reply comes late, with thousands of others when a
  // barrier releases. Delayed, its ACK would wait for the 40 ms timer (the
  // next request rarely comes sooner) and a whole job's timers would fire
  // together at the server; acknowledged when read, it costs the same packet.
  void ackRepliesWhenRead() const { setQuickAck(fd_.get(), true); }
  size_t maxFrame() const noexcept { return maxFrame_; }

  // Registers a call for reply `id`; false when the connection is broken.
  bool add(uint64_t id, const std::shared_ptr<Call>& call) {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_) {
      return false;
    }
    calls_.emplace(id, call);
    return true;
  }
  void forget(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.erase(id);
  }
  bool broken(std::string* reason) const {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_ && reason != nullptr) {
      *reason = reason_;
    }
    return broken_;
  }

  // 0, or the errno of a failed/timed-out write (the connection is then
  // failed unless nothing at all was written before a timeout).
  int send(std::string_view frame, TimePoint deadline) {
    std::lock_guard<std::mutex> lock(writeMu_);
    size_t written = 0;
    const int err =
        sendExact(fd_.get(), frame.data(), frame.size(), deadlineNs(deadline), &written);
    if (err != 0 && !(err == ETIMEDOUT && written == 0)) {
      fail(err == ETIMEDOUT ? "a request could not be written before its deadline"
                            : "write failed: " + errnoText(err));
    }
    return err;
  }

  // Marks the connection broken and fails every call waiting on it.
  void fail(const std::string& reason) {
    std::unordered_map<uint64_t, std::shared_ptr<Call>> calls;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (broken_) {
        return;
      }
      broken_ = true;
      reason_ = reason;
      calls.swap(calls_);
    }
    ::shutdown(fd_.get(), SHUT_RDWR);  // wakes the reader
    for (auto& [id, call] : calls) {
      std::lock_guard<std::mutex> lock(call->mu);
      call->lost = true;
      call->lostReason = reason;
      call->cv.notify_all();
    }
  }

 private:
  void readLoop() {
    FrameDecoder decoder(maxFrame_, FrameKind::kReply);
    for (;;) {
      char* buf = decoder.writable(size_t{64} * 1024);
      const ssize_t n = ::recv(fd_.get(), buf, size_t{64} * 1024, 0);
      if (n == 0) {
        fail("the store server closed the connection");
        return;
      }
      if (n < 0) {
        if (errno == EINTR) {
          continue;
        }
        fail("read failed: " + errnoText(errno));
        return;
      }
      decoder.commit(static_cast<size_t>(n));
      try {
        while (std::optional<Frame> f = decoder.next()) {
          Response resp = decodeResponse(f->header, f->payload);
          std::shared_ptr<Call> call;
          {
            std::lock_guard<std::mutex> lock(mu_);
            auto it = calls_.find(resp.id);
            if (it == calls_.end()) {
              continue;  // its caller gave up (timeout)
            }
            call = std::move(it->second);
            calls_.erase(it);
          }
          std::lock_guard<std::mutex> lock(call->mu);
          call->resp = std::move(resp);
          call->done = true;
          call->cv.notify_all();
        }
      } catch (const ProtocolError& e) {
        RES_WARN(log::kStore, "store client: malformed reply from %s: %s", target_.c_str(),
                 e.what());
        fail(std::string("protocol error in the server's reply: ") + e.what());
        return;
      }
      decoder.shrinkIfEmpty();
    }
  }

  FileDescriptor fd_;
  const uint64_t instance_;
  const size_t maxFrame_;
  const std::string target_;
  mutable std::mutex mu_;
  bool broken_ = false;
  std::string reason_;
  std::unordered_map<uint64_t, std::shared_ptr<Call>> calls_;
  std::mutex writeMu_;
  std::thread reader_;
};

struct TcpStoreClient::Attempt {
  enum class Outcome {
    kOk,
    kRefused,       // nothing listens there (ECONNREFUSED)
    kRetry,         // timeout, reset, unreachable, busy: worth another try
    kAuth,          // wrong token: final
    kIncompatible,  // not our protocol or version: final
  };
  Outcome outcome = Outcome::kRetry;
  std::string error;
  std::shared_ptr<ServerConnection> conn;
};

TcpStoreClient::TcpStoreClient(std::string host, uint16_t port, ClientOptions options)
    : host_(std::move(host)),
      port_(port),
      options_(std::move(options)),
      target_(formatHostPort(host_, port_)) {
  std::lock_guard<std::mutex> lock(connectMu_);
  conn_ = connectWithRetries(SteadyClock::now() + options_.connectTimeout, Connecting::kInitial);
  instance_ = conn_->instance();
}

TcpStoreClient::~TcpStoreClient() {
  close();
}

void TcpStoreClient::close() {
  std::shared_ptr<ServerConnection> conn;
  {
    std::lock_guard<std::mutex> lock(connectMu_);
    closed_ = true;
    conn = std::move(conn_);
  }
  if (conn) {
    conn->fail("client closed");
  }
}

std::string TcpStoreClient::describe() const {
  return "tcp://" + target_;
}

uint64_t TcpStoreClient::serverInstance() const {
  std::lock_guard<std::mutex> lock(connectMu_);
  return instance_;
}

TcpStoreClient::Attempt TcpStoreClient::connectOnce(TimePoint deadline) {
  Attempt a;
  std::vector<SocketAddress> addrs;
  if (Result<std::vector<SocketAddress>> resolved = resolveAll(host_, port_); resolved.ok()) {
    addrs = std::move(*resolved);
  } else {
    a.error = resolved.status().message();
    return a;
  }
  const TimePoint attemptDeadline = std::min(deadline, SteadyClock::now() + kMaxAttempt);
  for (const SocketAddress& addr : addrs) {
    FileDescriptor fd;
    int err = connectBefore(addr, deadlineNs(attemptDeadline), &fd);
    if (err != 0) {
      a.outcome = err == ECONNREFUSED ? Attempt::Outcome::kRefused : Attempt::Outcome::kRetry;
      a.error = "connect to " + addr.toString() + ": " + errnoText(err);
      continue;
    }
    (void)applySocketOptions(fd.get(), kConnectionOptions);
    std::string hello;
    encodeHello(Hello{kVersion, options_.token, options_.name}, &hello);
    err = sendExact(fd.get(), hello.data(), hello.size(), deadlineNs(attemptDeadline));
    char buf[kHelloReplyBytes];
    if (err == 0) {
      err = recvExact(fd.get(), buf, sizeof buf, deadlineNs(attemptDeadline));
    }
    if (err != 0) {
      a.outcome = Attempt::Outcome::kRetry;
      a.error =
          "handshake with " + addr.toString() + ": " +
          (err == ECONNRESET ? std::string("connection closed by the server") : errnoText(err));
      continue;
    }
    std::optional<HelloReply> reply;
    try {
      reply = decodeHelloReply(std::string_view(buf, sizeof buf));
    } catch (const ProtocolError& e) {
      a.outcome = Attempt::Outcome::kIncompatible;
      a.error = addr.toString() + ": " + e.what();
      return a;
    }
    switch (reply->status) {
      case HelloStatus::kOk: break;
      case HelloStatus::kTokenRefused:
        a.outcome = Attempt::Outcome::kAuth;
        a.error = "store server " + addr.toString() + " refused our job token";
        return a;
      case HelloStatus::kVersionUnsupported:
        a.outcome = Attempt::Outcome::kIncompatible;
        a.error = "store server " + addr.toString() + " speaks protocol version " +
                  std::to_string(reply->version) + ", we speak " + std::to_string(kVersion);
        return a;
      case HelloStatus::kBusy:
        a.outcome = Attempt::Outcome::kRetry;
        a.error = "store server " + addr.toString() + " is at its connection limit";
        continue;
      default:
        a.outcome = Attempt::Outcome::kIncompatible;
        a.error = "store server " + addr.toString() + " answered with unknown status " +
                  std::to_string(static_cast<int>(reply->status));
        return a;
    }
    // The reader blocks in recv; writes use MSG_DONTWAIT and poll.
    const int flags = ::fcntl(fd.get(), F_GETFL, 0);
    ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
    a.outcome = Attempt::Outcome::kOk;
    a.conn = std::make_shared<ServerConnection>(
        std::move(fd), reply->instanceId, std::max<size_t>(reply->maxFrameBytes, 1024), target_);
    return a;
  }
  return a;
}

std::shared_ptr<TcpStoreClient::ServerConnection> TcpStoreClient::connectWithRetries(
    TimePoint deadline, Connecting connecting) {
  Backoff backoff(options_.backoffInitial, options_.backoffMax);
  const auto start = SteadyClock::now();
  for (;;) {
    Attempt a = connectOnce(deadline);
    switch (a.outcome) {
      case Attempt::Outcome::kOk:
        if (backoff.attempts() > 0) {
          RES_INFO(log::kStore, "store client: connected to %s after %d retries", target_.c_str(),
                   backoff.attempts());
        }
        return a.conn;
      case Attempt::Outcome::kAuth: throw AuthRefused(a.error);
      case Attempt::Outcome::kIncompatible: throw ProtocolError(a.error);
      case Attempt::Outcome::kRefused:
        if (connecting == Connecting::kReconnect && !options_.followRestarts) {
          // The same server instance cannot come back on a refused port.
          throw ConnectionLost("store server " + target_ + " is gone: " + a.error);
        }
        break;
      case Attempt::Outcome::kRetry: break;
    }
    const Millis delay = backoff.next();
    const auto spent = std::chrono::duration_cast<Millis>(SteadyClock::now() - start);
    if (SteadyClock::now() + delay >= deadline) {
      throw ConnectionLost("cannot reach store server " + target_ + " after " +
                           std::to_string(backoff.attempts()) + " attempts in " +
                           std::to_string(spent.count()) + " ms: " + a.error);
    }
    RES_INFO(log::kStore, "store client: %s (attempt %d, %lld ms so far); retrying in %lld ms",
             a.error.c_str(), backoff.attempts(), static_cast<long long>(spent.count()),
             static_cast<long long>(delay.count()));
    std::this_thread::sleep_for(delay);
  }
}

std::shared_ptr<TcpStoreClient::ServerConnection> TcpStoreClient::connection(TimePoint deadline) {
  std::shared_ptr<ServerConnection> old;
  std::lock_guard<std::mutex> lock(connectMu_);
  if (closed_) {
    throw StoreClosed("store client for " + target_ + " is closed");
  }
  std::string reason;
  if (conn_ && !conn_->broken(&reason)) {
    return conn_;
  }
  old = std::move(conn_);
  if (options_.reconnectTimeout <= Millis(0)) {
    throw ConnectionLost("connection to store server " + target_ + " lost: " + reason);
  }
  const TimePoint until = std::min(deadline, SteadyClock::now() + options_.reconnectTimeout);
  RES_INFO(log::kStore, "store client: connection to %s lost (%s); reconnecting", target_.c_str(),
           reason.c_str());
  std::shared_ptr<ServerConnection> fresh;
  try {
    fresh = connectWithRetries(until, Connecting::kReconnect);
  } catch (const ConnectionLost& e) {
    throw ConnectionLost("connection to store server " + target_ + " lost (" + reason +
                         ") and not re-established: " + e.what());
  }
  if (fresh->instance() != instance_) {
    if (!options_.followRestarts) {
      fresh->fail("server instance changed");
      throw ConnectionLost("store server " + target_ +
                           " was restarted: the store's state is lost (connection lost: " +
                           reason + ")");
    }
    RES_WARN(log::kStore,
             "store client: store server %s was restarted (connection lost: %s): its state is "
             "lost; going on with the new instance",
             target_.c_str(), reason.c_str());
    instance_ = fresh->instance();
    if (options_.onServerRestart) {
      options_.onServerRestart();
    }
  }
  conn_ = fresh;
  return conn_;
}

Response TcpStoreClient::call(StoreRequest& req, Timeout timeout, CallMode mode) {
  const bool serverTimed = mode.serverTimed;
  const Millis ms = timeout.orDefault(options_.defaultTimeout);
  const TimePoint start = SteadyClock::now();
  const TimePoint serverDeadline = start + ms;
  const TimePoint deadline = serverTimed ? serverDeadline + graceFor(ms) : serverDeadline;
  for (;;) {
    std::shared_ptr<ServerConnection> conn = connection(deadline);
    auto call = std::make_shared<ServerConnection::Call>();
    req.id = nextId_.fetch_add(1, std::memory_order_relaxed);
    if (serverTimed) {
      // Rounded up, so the server never times out before the caller's deadline.
      req.number = std::chrono::ceil<Millis>(serverDeadline - SteadyClock::now()).count();
      req.number = std::max<int64_t>(req.number, 0);
    }
    std::string frame;
    encodeRequest(req, &frame);
    if (frame.size() - kFrameHeaderBytes > conn->maxFrame()) {
      throw InvalidArgument(
          std::string(opName(req.op)) + " request of " + std::to_string(frame.size()) +
          " bytes exceeds the server's frame limit of " + std::to_string(conn->maxFrame()));
    }
    if (!conn->add(req.id, call)) {
      continue;  // broke meanwhile: reconnect
    }
    if (serverTimed) {
      conn->ackRepliesWhenRead();
    }
    const int err = conn->send(frame, deadline);
    if (err == ETIMEDOUT) {
      conn->forget(req.id);
      throw TimeoutError(std::string(opName(req.op)) + " on store " + target_ +
                         ": could not send the request within " + std::to_string(ms.count()) +
                         " ms");
    }
    std::unique_lock<std::mutex> lock(call->mu);
    call->cv.wait_until(lock, deadline, [&] { return call->done || call->lost; });
    if (call->done) {
      if (call->resp.op != replyOpOf(req.op)) {
        lock.unlock();
        conn->fail("reply of the wrong kind");
        throw ProtocolError("store server " + target_ + " answered " + opName(req.op) + " with a " +
                            opName(call->resp.op) + " reply");
      }
      return std::move(call->resp);
    }
    if (!call->lost) {
      lock.unlock();
      conn->forget(req.id);
      throw TimeoutError(
          std::string(opName(req.op)) + " on store " + target_ + ": no reply within " +
          std::to_string(std::chrono::duration_cast<Millis>(SteadyClock::now() - start).count()) +
          " ms");
    }
    const std::string reason = call->lostReason;
    lock.unlock();
    if (!mode.idempotent) {
      // Followed to a restarted server, the request goes to the new
      // instance: whatever it did on the old one went with that one's state
      // (a joiner's registration, add, lost to the agent drill's store kill).
      if (options_.followRestarts && SteadyClock::now() < deadline &&
          connection(deadline)->instance() != conn->instance()) {
        continue;
      }
      throw ConnectionLost("connection to store server " + target_ + " lost during " +
                           opName(req.op) + " (" + reason +
                           "); the request may or may not have been applied");
    }
    if (SteadyClock::now() >= deadline) {
      throw ConnectionLost("connection to store server " + target_ + " lost during " +
                           opName(req.op) + ": " + reason);
    }
    // Idempotent: reconnect and send it again.
  }
}

namespace {

[[noreturn]] void throwReply(const Response& r, Millis timeout) {
  switch (r.status) {
    case ReplyStatus::kInvalid: throw InvalidArgument(r.message);
    case ReplyStatus::kUnavailable: throw ConnectionLost(r.message);
    case ReplyStatus::kTimeout:
      if (r.op == Op::kBarrier) {
        throw BarrierTimeout(r.report, timeout.count());
      }
      throw TimeoutError("wait timed out after " + std::to_string(timeout.count()) +
                             " ms; missing keys " + formatKeys(r.keys),
                         r.keys);
    case ReplyStatus::kBarrierOverflow: throw BarrierOverflow(r.report);
    case ReplyStatus::kBarrierStale: throw BarrierStale(r.report.name, r.report.generation);
    case ReplyStatus::kBarrierDropped:
      throw StoreError(StoreErrc::kBarrierStale, "the barrier was removed while waiting");
    case ReplyStatus::kOk: break;
  }
  throw ProtocolError("unexpected reply status");
}

Response checked(Response r, Millis timeout) {
  if (r.status != ReplyStatus::kOk) {
    throwReply(r, timeout);
  }
  return r;
}

}  // namespace

void TcpStoreClient::ping(Timeout timeout) {
  StoreRequest req;
  req.op = Op::kPing;
  checked(call(req, timeout, {.idempotent = true}), Millis(0));
}

void TcpStoreClient::set(std::string_view key, std::string_view value, Timeout timeout) {
  checkKey(key);
  checkValue(value);
  StoreRequest req;
  req.op = Op::kSet;
  req.key = key;
  req.value = value;
  checked(call(req, timeout, {.idempotent = true}), Millis(0));
}

void TcpStoreClient::setExpiring(std::string_view key, std::string_view value, Millis ttl,
                                 Timeout timeout) {
  checkKey(key);
  checkValue(value);
  StoreRequest req;
  req.op = Op::kSet;
  req.key = key;
  req.value = value;
  req.number = std::max<int64_t>(ttl.count(), 1);
  checked(call(req, timeout, {.idempotent = true}), Millis(0));
}

void TcpStoreClient::setExpiringMany(const std::vector<KeyValue>& pairs, Millis ttl,
                                     Timeout timeout) {
  if (pairs.empty()) {
    return;
  }
  StoreRequest req;
  req.op = Op::kSetExpiringMany;
  checkItems(req.op, pairs.size());
  for (const auto& [k, v] : pairs) {
    checkKey(k);
    checkValue(v);
  }
  req.pairs = pairs;
  req.number = std::max<int64_t>(ttl.count(), 1);
  checked(call(req, timeout, {.idempotent = true}), Millis(0));
}

std::optional<std::string> TcpStoreClient::get(std::string_view key, Timeout timeout) {
  checkKey(key);
  StoreRequest req;
  req.op = Op::kGet;
  req.key = key;
  return checked(call(req, timeout, {.idempotent = true}), Millis(0)).value;
}

int64_t TcpStoreClient::add(std::string_view key, int64_t delta, Timeout timeout) {
  checkKey(key);
  StoreRequest req;
  req.op = Op::kAdd;
  req.key = key;
  req.number = delta;
  return checked(call(req, timeout, {.idempotent = false}), Millis(0)).number;
}

CasResult TcpStoreClient::compareSet(std::string_view key, std::optional<std::string_view> expected,
                                     std::string_view desired, Timeout timeout) {
  checkKey(key);
  checkValue(desired);
  StoreRequest req;
  req.op = Op::kCompareSet;
  req.key = key;
  if (expected) {
    checkValue(*expected);
    req.expected = std::string(*expected);
  }
  req.value = desired;
  Response r = checked(call(req, timeout, {.idempotent = false}), Millis(0));
  return {r.flag, std::move(r.value)};
}

std::vector<std::optional<std::string>> TcpStoreClient::multiGet(
    const std::vector<std::string>& keys, Timeout timeout) {
  StoreRequest req = keysRequest(Op::kMultiGet, keys);
  Response r = checked(call(req, timeout, {.idempotent = true}), Millis(0));
  if (r.values.size() != keys.size()) {
    throw ProtocolError("multiGet of " + std::to_string(keys.size()) + " keys answered with " +
                        std::to_string(r.values.size()) + " values");
  }
  return std::move(r.values);
}

void TcpStoreClient::multiSet(const std::vector<KeyValue>& pairs, Timeout timeout) {
  checkItems(Op::kMultiSet, pairs.size());
  for (const auto& [k, v] : pairs) {
    checkKey(k);
    checkValue(v);
  }
  StoreRequest req;
  req.op = Op::kMultiSet;
  req.pairs = pairs;
  checked(call(req, timeout, {.idempotent = true}), Millis(0));
}

bool TcpStoreClient::remove(std::string_view key, Timeout timeout) {
  checkKey(key);
  StoreRequest req;
  req.op = Op::kRemove;
  req.key = key;
  return checked(call(req, timeout, {.idempotent = false}), Millis(0)).flag;
}

uint64_t TcpStoreClient::removePrefix(std::string_view prefix, Timeout timeout) {
  if (prefix.size() > kMaxKeyBytes) {
    checkKey(prefix);
  }
  StoreRequest req;
  req.op = Op::kRemovePrefix;
  req.key = prefix;
  return static_cast<uint64_t>(
      checked(call(req, timeout, {.idempotent = false}), Millis(0)).number);
}

bool TcpStoreClient::check(const std::vector<std::string>& keys, Timeout timeout) {
  StoreRequest req = keysRequest(Op::kCheck, keys);
  return checked(call(req, timeout, {.idempotent = true}), Millis(0)).flag;
}

void TcpStoreClient::wait(const std::vector<std::string>& keys, Timeout timeout) {
  StoreRequest req = keysRequest(Op::kWait, keys);
  checked(call(req, timeout, {.idempotent = true, .serverTimed = true}),
          timeout.orDefault(options_.defaultTimeout));
}

BarrierResult TcpStoreClient::barrier(const BarrierArrival& arrival, Timeout timeout) {
  checkBarrier(arrival);
  StoreRequest req;
  // Several ranks in one barrierRanks frame; a single one (`rank`, or
  // `ranks` of one) as a barrier frame, which every server understands.
  req.arrival = arrival;
  if (arrival.ranks.size() == 1) {
    req.arrival.rank = arrival.ranks.front();
    req.arrival.ranks.clear();
  }
  req.op = req.arrival.ranks.empty() ? Op::kBarrier : Op::kBarrierRanks;
  Response r = call(req, timeout, {.idempotent = true, .serverTimed = arrival.waitForRelease});
  if (r.status == ReplyStatus::kBarrierStale) {
    throw BarrierStale(arrival.name, arrival.generation);
  }
  return checked(std::move(r), timeout.orDefault(options_.defaultTimeout)).barrier;
}

}  // namespace resilient::store::tcp
