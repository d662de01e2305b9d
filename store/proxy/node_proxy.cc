#include "store/proxy/node_proxy.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <cstring>
#include <list>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/log.h"
#include "common/net/socket.h"
#include "common/net/socket_address.h"
#include "store/errors.h"
#include "store/tcp/hello_check.h"
#include "store/tcp/protocol.h"

namespace resilient::store::proxy {

using tcp::FrameHeader;
using tcp::Op;
using tcp::ReplyStatus;
using tcp::Response;
using tcp::StoreRequest;

namespace {

// A local connection never ends by a deadline: only by its peer, or by the
// proxy shutting it down (which wakes the blocked receive).
uint64_t farFuture() { return monotonicNs() + 365ULL * 24 * 3600 * 1000000000ULL; }

// One local client's connection: replies come from several threads (the
// reader, waits, barrier releases), one at a time. A connection belongs to
// one instance of the job's store (`epoch`): once the store restarted, no
// answer goes out on it (it may come from the new, empty instance before the
// client knows of the restart: a monitor would read its siblings' heartbeats
// as missing); the connection is closed instead, and the client, reconnecting,
// meets the proxy's new instance id and puts its state back.
struct Conn {
  FileDescriptor fd;
  std::string peer;
  std::atomic<uint64_t> epoch{UINT64_MAX};  // set by the handshake
  const std::atomic<uint64_t>* storeEpoch = nullptr;
  std::mutex sendMutex;
  std::atomic<bool> closed{false};

  void send(const std::string& bytes) {
    std::lock_guard<std::mutex> lock(sendMutex);
    if (closed.load()) {
      return;
    }
    if (storeEpoch != nullptr && storeEpoch->load() != epoch) {
      closeNow();
      return;
    }
    if (sendExact(fd.get(), bytes.data(), bytes.size(), monotonicNs() + 10000000000ULL) != 0) {
      closeNow();
    }
  }
  void reply(Response& r) {
    std::string out;
    tcp::encodeResponse(r, &out);
    send(out);
  }
  // Wakes the reader; the descriptor is closed with the last reference.
  void closeNow() noexcept {
    if (!closed.exchange(true)) {
      ::shutdown(fd.get(), SHUT_RDWR);
    }
  }
};
using ConnPtr = std::shared_ptr<Conn>;

Response answerTo(const StoreRequest& req) {
  Response r;
  r.op = tcp::replyOpOf(req.op);
  r.id = req.id;
  return r;
}

}  // namespace

class NodeProxy::Service : public std::enable_shared_from_this<NodeProxy::Service> {
 public:
  Service(std::shared_ptr<Store> upstream, NodeProxyOptions options);
  void start();
  void stop();
  uint16_t port() const noexcept { return port_; }
  std::string url() const { return "tcp://" + formatHostPort(options_.host, port_); }
  void upstreamRestarted() noexcept {
    // Only notes (called with the upstream client's connection lock held),
    // before that client sends anything to the new instance.
    {
      // One step for both: a connection's epoch and the instance id its hello
      // reply named must agree (handshake).
      std::lock_guard<std::mutex> lock(instanceMutex_);
      instanceId_ = tcp::randomInstanceId();
      epoch_.fetch_add(1);
    }
    restartPending_.store(true);
    wake_.notify_all();
  }
  NodeProxyCounters counters() const;

 private:
  // One barrier generation as this node sees it.
  struct Waiter {
    ConnPtr conn;
    StoreRequest req;
    TimePoint deadline;
    uint32_t index = 0;  // the arrival index of its (first) rank, once counted
  };
  struct Generation {
    int worldSize = 0;
    std::vector<int> queued;            // ranks not yet sent up
    std::vector<Waiter> queuedWaiters;  // their calls, answered once their batch is counted
    std::vector<Waiter> releaseWaiters; // counted, waiting for the release
    std::set<int> counted;
    bool flushing = false;
    bool watching = false;
    bool completed = false;
    uint32_t arrived = 0;
  };
  using GenerationKey = std::pair<std::string, uint64_t>;

  void acceptLoop();
  void serve(const ConnPtr& c);
  bool handshake(Conn& c);
  void execute(const ConnPtr& c, StoreRequest req);
  void onError(const ConnPtr& c, const StoreRequest& req, std::exception_ptr e);
  void spawn(std::function<void()> fn);

  // Barriers.
  void arrive(const ConnPtr& c, StoreRequest req);
  void flushBarrier(GenerationKey key);
  void watchBarrier(GenerationKey key);
  void release(Generation& g, uint32_t arrived);
  void forgetEarlier(const GenerationKey& key);
  void forgetGenerations(const std::string& prefix);  // under barrierMutex_ itself

  // Expiring writes.
  void queueExpiring(const std::string& key, const std::string& value, Millis ttl);
  void flushExpiring();
  void flushIfQueued(const std::vector<std::string>& keys);
  void background();
  // Every local connection (`staleOnly`: those of an instance before the
  // upstream store's latest restart).
  void closeConnections(bool staleOnly);

  std::shared_ptr<Store> upstream_;
  NodeProxyOptions options_;
  FileDescriptor listen_;
  uint16_t port_ = 0;
  std::mutex instanceMutex_;         // instanceId_ and epoch_ change together
  uint64_t instanceId_;              // under instanceMutex_
  std::atomic<uint64_t> epoch_{0};  // upstream restarts so far (read by Conn::send)
  std::atomic<bool> stop_{false};
  std::atomic<bool> restartPending_{false};
  std::thread acceptThread_;
  std::thread backgroundThread_;
  std::mutex wakeMutex_;
  std::condition_variable wake_;

  std::mutex connsMutex_;
  std::list<std::weak_ptr<Conn>> conns_;
  std::list<std::thread> readers_;

  std::mutex barrierMutex_;
  std::map<GenerationKey, Generation> generations_;

  std::mutex queueMutex_;
  std::map<std::string, std::pair<std::string, Millis>> queued_;
  // The keys of the flush on its way up (under queueMutex_): a call touching
  // one waits for that flush, else it could reach the store before it.
  std::set<std::string> writing_;
  std::mutex flushMutex_;  // one flush of the queue at a time

  mutable std::mutex countersMutex_;
  NodeProxyCounters counters_;
};

NodeProxy::Service::Service(std::shared_ptr<Store> upstream, NodeProxyOptions options)
    : upstream_(std::move(upstream)),
      options_(std::move(options)),
      instanceId_(tcp::randomInstanceId()) {
  listen_ = valueOrThrow(listenOn(options_.host, options_.port));
  port_ = localAddressOf(listen_.get()).port();
}

void NodeProxy::Service::start() {
  auto self = shared_from_this();
  acceptThread_ = std::thread([self] { self->acceptLoop(); });
  backgroundThread_ = std::thread([self] { self->background(); });
}

void NodeProxy::Service::stop() {
  stop_.store(true);
  wake_.notify_all();
  ::shutdown(listen_.get(), SHUT_RDWR);
  if (acceptThread_.joinable()) {
    acceptThread_.join();
  }
  if (backgroundThread_.joinable()) {
    backgroundThread_.join();
  }
  flushExpiring();  // what the node's monitors wrote last
  closeConnections(/*staleOnly=*/false);
  std::list<std::thread> readers;
  {
    std::lock_guard<std::mutex> lock(connsMutex_);
    readers.swap(readers_);
  }
  for (std::thread& t : readers) {
    t.join();
  }
}

NodeProxyCounters NodeProxy::Service::counters() const {
  std::lock_guard<std::mutex> lock(countersMutex_);
  return counters_;
}

void NodeProxy::Service::spawn(std::function<void()> fn) {
  // A thread per blocking call: a node has a few dozen clients, and each
  // waits upstream as long as its own call allows. It holds the service.
  std::thread([self = shared_from_this(), fn = std::move(fn)] { fn(); }).detach();
}

void NodeProxy::Service::acceptLoop() {
  while (!stop_.load()) {
    auto ready = waitReady(listen_.get(), POLLIN, 200);
    if (!ready.ok() || !*ready) {
      continue;
    }
    SocketAddress peer;
    FileDescriptor fd = acceptConnection(listen_.get(), &peer);
    if (!fd.valid()) {
      continue;
    }
    (void)applySocketOptions(fd.get(), tcp::kConnectionOptions);
    auto c = std::make_shared<Conn>();
    c->fd = std::move(fd);
    c->peer = peer.toString();
    c->storeEpoch = &epoch_;
    std::lock_guard<std::mutex> lock(connsMutex_);
    if (stop_.load()) {
      return;
    }
    conns_.push_back(c);
    readers_.emplace_back([this, c] { serve(c); });
  }
}

bool NodeProxy::Service::handshake(Conn& c) {
  std::string in(tcp::kHelloFixedBytes, '\0');
  if (recvExact(c.fd.get(), in.data(), in.size(), monotonicNs() + 10000000000ULL) != 0) {
    return false;
  }
  uint16_t tokenBytes = 0;
  uint16_t nameBytes = 0;
  std::memcpy(&tokenBytes, in.data() + 8, 2);
  std::memcpy(&nameBytes, in.data() + 10, 2);
  if (tokenBytes > tcp::kMaxTokenBytes || nameBytes > tcp::kMaxNameBytes) {
    return false;
  }
  in.resize(tcp::kHelloFixedBytes + tokenBytes + nameBytes);
  if (recvExact(c.fd.get(), in.data() + tcp::kHelloFixedBytes, in.size() - tcp::kHelloFixedBytes,
                monotonicNs() + 10000000000ULL) != 0) {
    return false;
  }
  size_t consumed = 0;
  std::optional<tcp::Hello> hello;
  try {
    hello = tcp::decodeHello(in, &consumed);
  } catch (const StoreError&) {
    return false;
  }
  if (!hello) {
    return false;
  }
  const tcp::HelloStatus status = tcp::checkHello(*hello, options_.token);
  if (status != tcp::HelloStatus::kOk) {
    RES_WARN(log::kStore, "node store proxy :%u: refusing client %s (%s): %s",
             static_cast<unsigned>(port_), c.peer.c_str(), hello->name.c_str(),
             tcp::helloStatusName(status));
  }
  // The connection belongs to the instance its hello reply names: a client
  // that connected while the store restarted, told the new instance's id,
  // is not closed as one of the old instance's afterwards (its next call
  // would be lost with "may or may not have been applied", since it finds
  // the same id again: a joiner's registration failed so in the agent drill).
  uint64_t instanceId = 0;
  {
    std::lock_guard<std::mutex> lock(instanceMutex_);
    c.epoch = epoch_.load();
    instanceId = instanceId_;
  }
  std::string out;
  tcp::encodeHelloReply(tcp::HelloReply{tcp::kVersion, status, instanceId,
                                        static_cast<uint32_t>(tcp::kDefaultMaxFrameBytes)},
                        &out);
  c.send(out);
  return status == tcp::HelloStatus::kOk;
}

void NodeProxy::Service::serve(const ConnPtr& c) {
  if (!handshake(*c)) {
    c->closeNow();
    return;
  }
  std::string header(tcp::kFrameHeaderBytes, '\0');
  std::string payload;
  while (!c->closed.load()) {
    if (recvExact(c->fd.get(), header.data(), header.size(), farFuture()) != 0) {
      break;
    }
    StoreRequest req;
    try {
      const FrameHeader h =
          tcp::decodeFrameHeader(header, tcp::kDefaultMaxFrameBytes, tcp::FrameKind::kRequest);
      payload.resize(h.length);
      if (h.length > 0 &&
          recvExact(c->fd.get(), payload.data(), payload.size(), farFuture()) != 0) {
        break;
      }
      req = tcp::decodeRequest(h, payload);
    } catch (const StoreError& e) {
      RES_WARN(log::kStore, "node store proxy :%u: dropping client %s: %s",
               static_cast<unsigned>(port_), c->peer.c_str(), e.what());
      break;
    }
    execute(c, std::move(req));
  }
  c->closeNow();
}

void NodeProxy::Service::onError(const ConnPtr& c, const StoreRequest& req,
                                 std::exception_ptr e) {
  Response r = answerTo(req);
  try {
    std::rethrow_exception(e);
  } catch (const BarrierTimeout& t) {
    r.status = ReplyStatus::kTimeout;
    r.report = t.report();
  } catch (const BarrierOverflow& o) {
    r.status = ReplyStatus::kBarrierOverflow;
    r.report = o.report();
  } catch (const BarrierStale&) {
    r.status = ReplyStatus::kBarrierStale;
  } catch (const TimeoutError& t) {
    if (req.op == Op::kWait) {
      r.status = ReplyStatus::kTimeout;
      r.keys = t.missingKeys();
    } else {
      r.status = ReplyStatus::kUnavailable;  // the store did not answer in time
      r.message = std::string("the job's store, through the node's proxy: ") + t.what();
    }
  } catch (const InvalidArgument& i) {
    r.status = ReplyStatus::kInvalid;
    r.message = i.what();
  } catch (const std::exception& x) {
    // Unreachable, closed, refused: the client reports the store lost, as
    // it would without the proxy.
    r.status = ReplyStatus::kUnavailable;
    r.message = std::string("the job's store, through the node's proxy: ") + x.what();
  }
  c->reply(r);
}

void NodeProxy::Service::execute(const ConnPtr& c, StoreRequest req) {
  Response r = answerTo(req);
  try {
    switch (req.op) {
      case Op::kPing:
        break;
      case Op::kSet:
        if (req.number > 0) {
          queueExpiring(req.key, req.value, Millis(req.number));
          break;
        }
        flushIfQueued({req.key});
        upstream_->set(req.key, req.value);
        break;
      case Op::kGet:
        flushIfQueued({req.key});
        r.value = upstream_->get(req.key);
        r.flag = r.value.has_value();
        break;
      case Op::kAdd:
        flushIfQueued({req.key});
        r.number = upstream_->add(req.key, req.number);
        break;
      case Op::kCompareSet: {
        flushIfQueued({req.key});
        const CasResult cas = upstream_->compareSet(
            req.key,
            req.expected ? std::optional<std::string_view>(*req.expected) : std::nullopt,
            req.value);
        r.flag = cas.swapped;
        r.value = cas.current;
        break;
      }
      case Op::kMultiGet:
        flushIfQueued(req.keys);
        r.values = upstream_->multiGet(req.keys);
        break;
      case Op::kMultiSet: {
        std::vector<std::string> keys;
        for (const KeyValue& kv : req.pairs) {
          keys.push_back(kv.first);
        }
        flushIfQueued(keys);
        upstream_->multiSet(req.pairs);
        break;
      }
      case Op::kRemove:
        flushIfQueued({req.key});
        r.flag = upstream_->remove(req.key);
        break;
      case Op::kRemovePrefix: {
        flushExpiring();
        r.number = static_cast<int64_t>(upstream_->removePrefix(req.key));
        forgetGenerations(req.key);
        break;
      }
      case Op::kCheck:
        flushIfQueued(req.keys);
        r.flag = upstream_->check(req.keys);
        break;
      case Op::kWait:
        flushIfQueued(req.keys);
        spawn([this, c, req] {
          Response w = answerTo(req);
          try {
            upstream_->wait(req.keys, Timeout(Millis(req.number)));
          } catch (...) {
            onError(c, req, std::current_exception());
            return;
          }
          c->reply(w);
        });
        return;
      case Op::kBarrier:
      case Op::kBarrierRanks:
        arrive(c, std::move(req));
        return;
      case Op::kSetExpiringMany:
        for (const KeyValue& kv : req.pairs) {
          queueExpiring(kv.first, kv.second, Millis(req.number));
        }
        break;
    }
  } catch (...) {
    onError(c, req, std::current_exception());
    return;
  }
  c->reply(r);
}

// ---- barriers -------------------------------------------------------------

void NodeProxy::Service::arrive(const ConnPtr& c, StoreRequest req) {
  {
    std::lock_guard<std::mutex> lock(countersMutex_);
    ++counters_.localBarrierArrivals;
  }
  const BarrierArrival& a = req.arrival;
  const std::vector<int> ranks = arrivalRanks(a);
  const bool inRange = std::all_of(ranks.begin(), ranks.end(),
                                   [&](int r) { return r >= 0 && r < a.worldSize; });
  if (!inRange) {
    // The store records the surplus and names it; nothing to aggregate.
    spawn([this, c, req] {
      try {
        {
          std::lock_guard<std::mutex> lock(countersMutex_);
          ++counters_.upstreamBarrierCalls;
        }
        Response r = answerTo(req);
        // A waiting call's timeout is the client's; a count, the store's own.
        r.barrier = upstream_->barrier(req.arrival, req.arrival.waitForRelease
                                                        ? Timeout(Millis(req.number))
                                                        : Timeout{});
        c->reply(r);
      } catch (...) {
        onError(c, req, std::current_exception());
      }
    });
    return;
  }
  const GenerationKey key{a.name, a.generation};
  Waiter w{c, req, SteadyClock::now() + Millis(req.number), 0};
  bool startFlush = false;
  {
    std::lock_guard<std::mutex> lock(barrierMutex_);
    Generation& g = generations_[key];
    if (g.worldSize == 0) {
      g.worldSize = a.worldSize;
    } else if (g.worldSize != a.worldSize) {
      Response r = answerTo(req);
      r.status = ReplyStatus::kInvalid;
      r.message = "barrier '" + a.name + "' generation " + std::to_string(a.generation) +
                  ": world size " + std::to_string(a.worldSize) + ", not " +
                  std::to_string(g.worldSize) + " as its first arrival said";
      c->reply(r);
      return;
    }
    if (g.completed) {
      Response r = answerTo(req);
      r.barrier = BarrierResult{true, 0, static_cast<uint32_t>(g.worldSize)};
      c->reply(r);
      return;
    }
    g.queued.insert(g.queued.end(), ranks.begin(), ranks.end());
    g.queuedWaiters.push_back(std::move(w));
    if (!g.flushing) {
      g.flushing = true;
      startFlush = true;
    }
  }
  if (startFlush) {
    spawn([this, key] { flushBarrier(key); });
  }
}

void NodeProxy::Service::forgetGenerations(const std::string& prefix) {
  // The store no longer has them (removed, or the store restarted empty);
  // one with an upstream call under way ends with it.
  std::lock_guard<std::mutex> lock(barrierMutex_);
  for (auto it = generations_.begin(); it != generations_.end();) {
    it = it->first.first.rfind(prefix, 0) == 0 && !it->second.flushing && !it->second.watching
             ? generations_.erase(it)
             : std::next(it);
  }
}

void NodeProxy::Service::forgetEarlier(const GenerationKey& key) {
  // A completed generation stays for the node's late arrivals; the ones
  // before it of the same barrier are done with.
  for (auto it = generations_.lower_bound({key.first, 0}); it != generations_.end() &&
                                                              it->first.first == key.first &&
                                                              it->first.second < key.second;) {
    it = it->second.completed && !it->second.flushing && !it->second.watching
             ? generations_.erase(it)
             : std::next(it);
  }
}

void NodeProxy::Service::release(Generation& g, uint32_t arrived) {
  g.completed = true;
  g.arrived = arrived;
  auto answer = [&](std::vector<Waiter>& list) {
    for (Waiter& w : list) {
      Response r = answerTo(w.req);
      r.barrier = BarrierResult{true, w.index, arrived};
      w.conn->reply(r);
    }
    list.clear();
  };
  answer(g.queuedWaiters);
  answer(g.releaseWaiters);
}

void NodeProxy::Service::flushBarrier(GenerationKey key) {
  // The node's other ranks usually arrive within a moment of the first.
  std::this_thread::sleep_for(options_.barrierLinger);
  for (;;) {
    BarrierArrival up;
    std::vector<Waiter> batch;
    {
      std::lock_guard<std::mutex> lock(barrierMutex_);
      Generation& g = generations_[key];
      if (g.queued.empty() || g.completed) {
        g.flushing = false;
        return;
      }
      up.name = key.first;
      up.generation = key.second;
      up.worldSize = g.worldSize;
      up.ranks.swap(g.queued);
      up.rank = up.ranks.front();
      up.waitForRelease = false;
      batch.swap(g.queuedWaiters);
    }
    {
      std::lock_guard<std::mutex> lock(countersMutex_);
      ++counters_.upstreamBarrierCalls;
    }
    BarrierResult result;
    std::exception_ptr error;
    try {
      // Counting does not wait for the others: the store's own call timeout.
      result = upstream_->barrier(up);
    } catch (...) {
      error = std::current_exception();
    }
    bool startWatch = false;
    {
      std::lock_guard<std::mutex> lock(barrierMutex_);
      Generation& g = generations_[key];
      if (error) {
        for (Waiter& w : batch) {
          onError(w.conn, w.req, error);
        }
        continue;
      }
      g.counted.insert(up.ranks.begin(), up.ranks.end());
      g.arrived = std::max(g.arrived, result.arrived);
      // The store numbered the batch's first new rank; the others follow in
      // the batch's order (a rank the store had counted before gets 0 there,
      // an approximation here only when a batch mixes both).
      if (result.arrivalIndex > 0) {
        std::map<int, uint32_t> indexOf;
        for (const int r : up.ranks) {
          indexOf.emplace(r, result.arrivalIndex + static_cast<uint32_t>(indexOf.size()));
        }
        for (Waiter& w : batch) {
          w.index = indexOf[arrivalRanks(w.req.arrival).front()];
        }
      }
      if (result.completed) {
        g.queuedWaiters.insert(g.queuedWaiters.end(), std::make_move_iterator(batch.begin()),
                               std::make_move_iterator(batch.end()));
        release(g, static_cast<uint32_t>(g.worldSize));
        g.flushing = false;
        forgetEarlier(key);
        return;
      }
      for (Waiter& w : batch) {
        if (w.req.arrival.waitForRelease) {
          g.releaseWaiters.push_back(std::move(w));
        } else {
          Response r = answerTo(w.req);
          r.barrier = BarrierResult{false, w.index, result.arrived};
          w.conn->reply(r);
        }
      }
      if (!g.releaseWaiters.empty() && !g.watching) {
        g.watching = true;
        startWatch = true;
      }
    }
    if (startWatch) {
      spawn([this, key] { watchBarrier(key); });
    }
  }
}

void NodeProxy::Service::watchBarrier(GenerationKey key) {
  for (;;) {
    BarrierArrival up;
    TimePoint earliest = TimePoint::max();
    {
      std::lock_guard<std::mutex> lock(barrierMutex_);
      Generation& g = generations_[key];
      if (g.releaseWaiters.empty() || g.completed) {
        g.watching = false;
        return;
      }
      for (const Waiter& w : g.releaseWaiters) {
        earliest = std::min(earliest, w.deadline);
      }
      up.name = key.first;
      up.generation = key.second;
      up.worldSize = g.worldSize;
      up.rank = *g.counted.begin();  // counted already: this arrival only waits
      up.waitForRelease = true;
    }
    {
      std::lock_guard<std::mutex> lock(countersMutex_);
      ++counters_.upstreamBarrierCalls;
    }
    const Millis left = std::max(
        Millis(1), std::chrono::duration_cast<Millis>(earliest - SteadyClock::now()));
    std::exception_ptr error;
    bool expired = false;
    try {
      (void)upstream_->barrier(up, Timeout(left));
    } catch (const BarrierTimeout&) {
      error = std::current_exception();
      expired = true;
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(barrierMutex_);
    Generation& g = generations_[key];
    if (!error) {
      release(g, static_cast<uint32_t>(g.worldSize));
      g.watching = false;
      forgetEarlier(key);
      return;
    }
    // A timeout answers the waiters whose own deadline has come; another
    // error answers every waiter.
    const TimePoint now = SteadyClock::now();
    std::vector<Waiter> keep;
    for (Waiter& w : g.releaseWaiters) {
      if (!expired || w.deadline <= now) {
        onError(w.conn, w.req, error);
      } else {
        keep.push_back(std::move(w));
      }
    }
    g.releaseWaiters.swap(keep);
  }
}

// ---- expiring writes --------------------------------------------------------

void NodeProxy::Service::queueExpiring(const std::string& key, const std::string& value,
                                       Millis ttl) {
  checkKey(key);
  checkValue(value);
  {
    std::lock_guard<std::mutex> lock(countersMutex_);
    ++counters_.localExpiringWrites;
  }
  std::lock_guard<std::mutex> lock(queueMutex_);
  queued_[key] = {value, ttl};
}

void NodeProxy::Service::flushExpiring() {
  std::lock_guard<std::mutex> flushing(flushMutex_);
  std::map<std::string, std::pair<std::string, Millis>> taken;
  {
    std::lock_guard<std::mutex> lock(queueMutex_);
    taken.swap(queued_);
    for (const auto& kv : taken) {
      writing_.insert(kv.first);
    }
  }
  if (taken.empty()) {
    return;
  }
  std::map<Millis, std::vector<KeyValue>> byTtl;
  for (auto& [key, v] : taken) {
    byTtl[v.second].emplace_back(key, v.first);
  }
  for (auto& [ttl, pairs] : byTtl) {
    try {
      {
        std::lock_guard<std::mutex> lock(countersMutex_);
        ++counters_.upstreamExpiringBatches;
      }
      upstream_->setExpiringMany(pairs, ttl);
    } catch (const std::exception& e) {
      // Kept for the next flush unless written again meanwhile: a store that
      // is away for a moment loses no heartbeat but the ones it outlived.
      RES_WARN(log::kStore, "node store proxy :%u: %zu expiring writes not written yet: %s",
               static_cast<unsigned>(port_), pairs.size(), e.what());
      std::lock_guard<std::mutex> lock(queueMutex_);
      for (KeyValue& kv : pairs) {
        queued_.emplace(std::move(kv.first), std::make_pair(std::move(kv.second), ttl));
      }
    }
  }
  std::lock_guard<std::mutex> lock(queueMutex_);
  writing_.clear();
}

void NodeProxy::Service::flushIfQueued(const std::vector<std::string>& keys) {
  bool any = false;
  {
    std::lock_guard<std::mutex> lock(queueMutex_);
    for (const std::string& k : keys) {
      any = any || queued_.count(k) > 0 || writing_.count(k) > 0;
    }
  }
  if (any) {
    flushExpiring();
  }
}

void NodeProxy::Service::closeConnections(bool staleOnly) {
  const uint64_t current = epoch_.load();
  std::lock_guard<std::mutex> lock(connsMutex_);
  for (auto it = conns_.begin(); it != conns_.end();) {
    if (ConnPtr c = it->lock()) {
      if (!staleOnly || c->epoch.load() != current) {
        c->closeNow();
      }
      ++it;
    } else {
      it = conns_.erase(it);
    }
  }
}

void NodeProxy::Service::background() {
  while (!stop_.load()) {
    {
      std::unique_lock<std::mutex> lock(wakeMutex_);
      wake_.wait_for(lock, options_.expiringLinger,
                     [this] { return stop_.load() || restartPending_.load(); });
    }
    if (restartPending_.exchange(false)) {
      // The store's state is gone: the local clients must see a new
      // instance to put theirs back (upstreamRestarted took one), and no
      // barrier generation it counted exists any more.
      forgetGenerations("");
      closeConnections(/*staleOnly=*/true);
      RES_WARN(log::kStore, "node store proxy :%u: the job's store restarted: the node's "
               "clients reconnect and put their state back",
               static_cast<unsigned>(port_));
    }
    flushExpiring();
  }
}

// ---- NodeProxy ---------------------------------------------------------------

NodeProxy::NodeProxy(std::shared_ptr<Store> upstream, NodeProxyOptions options)
    : service_(std::make_shared<Service>(std::move(upstream), std::move(options))) {
  service_->start();
}

NodeProxy::~NodeProxy() { service_->stop(); }

uint16_t NodeProxy::port() const noexcept { return service_->port(); }

std::string NodeProxy::url() const { return service_->url(); }

void NodeProxy::upstreamRestarted() noexcept { service_->upstreamRestarted(); }

NodeProxyCounters NodeProxy::counters() const { return service_->counters(); }

}  // namespace resilient::store::proxy
