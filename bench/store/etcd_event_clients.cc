#include "bench/store/etcd_event_clients.h"

#include <curl/curl.h>
#include <errno.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <future>
#include <optional>
#include <stdexcept>

#include "store/backoff.h"
#include "store/errors.h"
#include "store/etcd/http_client.h"
#include "store/etcd/kv_api.h"
#include "store/etcd/rpc.h"
#include "store/etcd/store_protocol.h"
#include "store/etcd/watch.h"

namespace resilient::store::bench {
namespace {

using Json = nlohmann::json;

// One member, nowhere to fail over to: a request waits for its answer
// longer than etcd takes to refuse one it cannot apply in time (its request
// timeout, 7 s by default, or "too many requests" at once), so that an
// overloaded etcd answers first; a request the gateway never answers is
// sent again after this. A watch lasts as long as a round.
constexpr std::chrono::milliseconds kRequestTimeout(30000);
constexpr std::chrono::milliseconds kWatchTimeout(3600000);
// A failed request is sent again, with EtcdStore's backoff (20 ms doubling
// to 1 s, jittered), until the deadline EtcdStore would give it: the
// benchmark's clients time out after 600 s.
constexpr uint64_t kRetryForNs = 600'000'000'000ull;
// A curl socket as the event loop's tag, and back.
void* tagOf(int fd) {
  return reinterpret_cast<void*>(static_cast<intptr_t>(fd));  // NOLINT(performance-no-int-to-ptr)
}
int fdOf(void* tag) {
  return static_cast<int>(reinterpret_cast<intptr_t>(tag));
}

}  // namespace

struct EtcdEventClients::Rank {
  int rank = 0;
  CURL* easy = nullptr;
  size_t endpoint = 0;
  // The transfer in flight.
  const char* path = nullptr;
  std::string body;
  bool stream = false;
  etcd::ResponseSink sink;
  char errbuf[etcd::kCurlErrorBytes] = {0};
  std::function<bool(std::string_view)> onLine;
  int retries = 0;
  uint64_t retryAtNs = 0;
  uint64_t retryUntilNs = 0;  // set when the request is first sent
  Backoff backoff{Millis(20), Millis(1000)};
  // Barrier.
  enum class Phase { kIdle, kArrive, kWatch, kOp, kAddRead, kAddTxn } phase = Phase::kIdle;
  std::optional<etcd::BarrierArrivalSteps> arrival;
  bool watchPut = false;
  std::string watchError;
  uint64_t sendNs = 0;
  uint64_t releaseNs = 0;
  bool released = false;
  bool failed = false;
  std::string error;
  // Ops.
  std::string key;
  std::string counter;
  std::optional<etcd::CounterAddSteps> add;
};

EtcdEventClients::EtcdEventClients(const std::vector<std::string>& endpoints, int clients,
                                   int firstRank, const std::string& sourceIp, int ranksPerClient)
    : endpoints_(endpoints),
      clientId_(etcd::newClientId()),
      ranksPerClient_(ranksPerClient),
      events_(1024) {
  if (Status s = events_.status(); !s.ok()) {
    throw std::runtime_error(s.toString());
  }
  if (!sourceIp.empty()) {
    interface_ = "host!" + sourceIp;
  }
  etcd::initCurl();
  grantMarkerLease();
  headers_ = etcd::newRequestHeaders();
  multi_ = curl_multi_init();
  CURLM* m = static_cast<CURLM*>(multi_);
  curl_multi_setopt(m, CURLMOPT_SOCKETFUNCTION, &EtcdEventClients::socketCallback);
  curl_multi_setopt(m, CURLMOPT_SOCKETDATA, this);
  curl_multi_setopt(m, CURLMOPT_TIMERFUNCTION, &EtcdEventClients::timerCallback);
  curl_multi_setopt(m, CURLMOPT_TIMERDATA, this);
  // The pool keeps every rank's keep-alive connection.
  curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, static_cast<long>(clients) + 16);
  for (int i = 0; i < clients; ++i) {
    auto r = std::make_unique<Rank>();
    r->rank = firstRank + i;
    r->easy = curl_easy_init();
    r->endpoint = static_cast<size_t>(i) % endpoints_.size();
    r->key = "bench/" + std::to_string(r->rank);
    r->counter = "bench/counter/" + std::to_string(r->rank);
    Rank* raw = r.get();
    r->onLine = [raw](std::string_view line) {
      const etcd::WatchLine w = etcd::parseWatchLine(line);
      switch (w.kind) {
        case etcd::WatchLine::Kind::kMore: return true;
        case etcd::WatchLine::Kind::kPut:
          raw->watchPut = true;
          raw->releaseNs = monotonicNs();
          return false;
        case etcd::WatchLine::Kind::kCanceled:
        case etcd::WatchLine::Kind::kError: raw->watchError = w.error; return false;
      }
      return false;
    };
    ranks_.push_back(std::move(r));
  }
  thread_ = std::thread([this] { loop(); });
}

EtcdEventClients::~EtcdEventClients() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake();
  thread_.join();
  CURLM* m = static_cast<CURLM*>(multi_);
  for (auto& r : ranks_) {
    curl_multi_remove_handle(m, r->easy);
    curl_easy_cleanup(r->easy);
  }
  curl_multi_cleanup(m);
  etcd::freeRequestHeaders(headers_);
}

void EtcdEventClients::wake() {
  events_.wake();
}

void EtcdEventClients::runInLoop(std::function<void()> fn) {
  std::promise<void> done;
  std::future<void> f = done.get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back([&] {
      try {
        fn();
        done.set_value();
      } catch (...) {
        done.set_exception(std::current_exception());
      }
    });
  }
  wake();
  f.get();
}

int EtcdEventClients::socketCallback(void* /*easy*/, int fd, int what, void* self,
                                     void* /*socketp*/) {
  auto* me = static_cast<EtcdEventClients*>(self);
  if (what == CURL_POLL_REMOVE) {
    me->events_.remove(fd);
    return 0;
  }
  const uint32_t events = ((what & CURL_POLL_IN) != 0 ? EventLoop::kReadable : 0u) |
                          ((what & CURL_POLL_OUT) != 0 ? EventLoop::kWritable : 0u);
  if (!me->events_.modify(fd, events, tagOf(fd)).ok()) {
    (void)me->events_.add(fd, events, tagOf(fd));
  }
  return 0;
}

int EtcdEventClients::timerCallback(void* /*multi*/, long timeoutMs, void* self) {
  auto* me = static_cast<EtcdEventClients*>(self);
  me->timerDueNs_ =
      timeoutMs < 0 ? -1 : static_cast<int64_t>(monotonicNs()) + timeoutMs * 1000000ll;
  return 0;
}

void EtcdEventClients::loop() {
  CURLM* m = static_cast<CURLM*>(multi_);
  int running = 0;
  for (;;) {
    int64_t waitNs =
        timerDueNs_ < 0 ? 100'000'000 : timerDueNs_ - static_cast<int64_t>(monotonicNs());
    for (Rank* r : retries_) {
      waitNs = std::min(waitNs,
                        static_cast<int64_t>(r->retryAtNs) - static_cast<int64_t>(monotonicNs()));
    }
    const int timeoutMs =
        waitNs <= 0 ? 0 : static_cast<int>(std::min<int64_t>(100, (waitNs + 999999) / 1000000));
    (void)events_.wait(timeoutMs, [&](void* tag, uint32_t events) {
      int flags = 0;
      if ((events & EventLoop::kReadable) != 0) {
        flags |= CURL_CSELECT_IN;
      }
      if ((events & EventLoop::kWritable) != 0) {
        flags |= CURL_CSELECT_OUT;
      }
      if ((events & EventLoop::kErrorOrHangup) != 0) {
        flags |= CURL_CSELECT_ERR;
      }
      curl_multi_socket_action(m, static_cast<curl_socket_t>(fdOf(tag)), flags, &running);
    });
    std::deque<std::function<void()>> tasks;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) {
        return;
      }
      tasks.swap(tasks_);
    }
    for (auto& t : tasks) {
      t();
    }
    if (timerDueNs_ >= 0 && static_cast<int64_t>(monotonicNs()) >= timerDueNs_) {
      timerDueNs_ = -1;
      curl_multi_socket_action(m, CURL_SOCKET_TIMEOUT, 0, &running);
    }
    int left = 0;
    while (CURLMsg* msg = curl_multi_info_read(m, &left)) {
      if (msg->msg == CURLMSG_DONE) {
        finished(msg->easy_handle, static_cast<int>(msg->data.result));
      }
    }
    if (!retries_.empty()) {
      const uint64_t now = monotonicNs();
      std::vector<Rank*> due;
      auto it = std::partition(retries_.begin(), retries_.end(),
                               [now](Rank* r) { return r->retryAtNs > now; });
      due.assign(it, retries_.end());
      retries_.erase(it, retries_.end());
      for (Rank* r : due) {
        send(*r, r->path, std::string(r->body), r->stream);
      }
    }
  }
}

void EtcdEventClients::send(Rank& rank, const char* path, const std::string& body, bool stream) {
  rank.path = path;
  if (&body != &rank.body) {
    rank.body = body;
  }
  rank.stream = stream;
  rank.sink = etcd::ResponseSink{};
  if (stream) {
    rank.sink.onLine = &rank.onLine;
  }
  etcd::prepareRequest(rank.easy, etcd::urlOf(endpoints_[rank.endpoint], path), rank.body,
                       stream ? kWatchTimeout : kRequestTimeout, headers_, &rank.sink, rank.errbuf);
  curl_easy_setopt(rank.easy, CURLOPT_PRIVATE, &rank);
  if (!interface_.empty()) {
    curl_easy_setopt(rank.easy, CURLOPT_INTERFACE, interface_.c_str());
  }
  curl_multi_add_handle(static_cast<CURLM*>(multi_), rank.easy);
}

void EtcdEventClients::retryLater(Rank& rank, const std::string& why) {
  const uint64_t now = monotonicNs();
  if (rank.retries++ == 0) {
    rank.retryUntilNs = now + kRetryForNs;
    rank.backoff.reset();
  }
  if (retryReasons_++ == 0) {
    std::fprintf(stderr, "resilient-store-bench: event driver: first retried request: %s\n",
                 why.c_str());
  }
  if (now >= rank.retryUntilNs) {
    fail(rank, why + " (" + std::to_string(rank.retries) + " attempts)");
    return;
  }
  rank.retryAtNs = now + static_cast<uint64_t>(rank.backoff.next().count()) * 1000000ull;
  retries_.push_back(&rank);
}

void EtcdEventClients::fail(Rank& rank, const std::string& why) {
  if (rank.phase == Rank::Phase::kOp || rank.phase == Rank::Phase::kAddRead ||
      rank.phase == Rank::Phase::kAddTxn) {
    if (opErrors_++ == 0) {
      firstError_ = why;
    }
  } else {
    rank.failed = true;
    rank.error = why;
  }
  settle(rank);
}

void EtcdEventClients::settle(Rank& rank) {
  rank.phase = Rank::Phase::kIdle;
  std::lock_guard<std::mutex> lock(mu_);
  if (--pending_ == 0) {
    cv_.notify_all();
  }
}

void EtcdEventClients::finished(void* easy, int code) {
  CURL* e = static_cast<CURL*>(easy);
  Rank* rank = nullptr;
  curl_easy_getinfo(e, CURLINFO_PRIVATE, reinterpret_cast<char**>(&rank));
  curl_multi_remove_handle(static_cast<CURLM*>(multi_), e);
  etcd::HttpResult r = etcd::finishRequest(e, code, &rank->sink, rank->errbuf);
  const std::string& ep = endpoints_[rank->endpoint];
  if (rank->phase == Rank::Phase::kWatch) {
    if (rank->watchPut) {
      rank->released = true;
      settle(*rank);
    } else if (!rank->watchError.empty()) {
      fail(*rank, ep + ": " + rank->watchError);
    } else {
      // The stream ended without the event: watch again from the same revision.
      retryLater(*rank, ep + ": watch ended: " + r.error);
    }
    return;
  }
  std::string why;
  std::optional<Json> answer;
  try {
    answer = etcd::answerOf(ep, rank->path, r, &why);
  } catch (const std::exception& ex) {
    fail(*rank, ex.what());
    return;
  }
  if (!answer) {
    retryLater(*rank, why);  // the same request again: every one is idempotent
    return;
  }
  rank->retries = 0;
  if (rank->phase == Rank::Phase::kArrive) {
    onBarrierAnswer(*rank, &*answer);
  } else {
    onOpAnswer(*rank, &*answer);
  }
}

void EtcdEventClients::startArrival(Rank& rank) {
  rank.phase = Rank::Phase::kArrive;
  BarrierArrival a{name_, generation_, rank.rank * ranksPerClient_, worldSize_, true};
  if (ranksPerClient_ > 1) {
    for (int i = 0; i < ranksPerClient_; ++i) {
      a.ranks.push_back(rank.rank * ranksPerClient_ + i);
    }
  }
  rank.arrival.emplace(std::move(a));
  rank.retries = 0;
  rank.sendNs = monotonicNs();
  const etcd::EtcdRequest req = rank.arrival->first();
  send(rank, req.path, req.body.dump(), false);
}

void EtcdEventClients::startWatch(Rank& rank) {
  rank.phase = Rank::Phase::kWatch;
  rank.watchPut = false;
  rank.watchError.clear();
  send(rank, etcd::kv::kWatchPath,
       etcd::watchCreateRequest(rank.arrival->watchKey(), rank.arrival->watchFrom()).dump(), true);
}

void EtcdEventClients::onBarrierAnswer(Rank& rank, const void* a) {
  const Json& answer = *static_cast<const Json*>(a);
  std::optional<etcd::EtcdRequest> next;
  try {
    next = rank.arrival->next(answer);
  } catch (const std::exception& ex) {
    fail(rank, ex.what());
    return;
  }
  if (next) {
    send(rank, next->path, next->body.dump(), false);
    return;
  }
  if (rank.arrival->result().completed) {
    rank.releaseNs = monotonicNs();
    rank.released = true;
    settle(rank);
    return;
  }
  startWatch(rank);
}

void EtcdEventClients::startOp(Rank& rank) {
  rank.retries = 0;
  switch (op_) {
    case OpKind::kSet:
      rank.phase = Rank::Phase::kOp;
      send(rank, etcd::kv::kPutPath, etcd::kv::put(rank.key, "0123456789abcdef").dump(), false);
      return;
    case OpKind::kGet:
      rank.phase = Rank::Phase::kOp;
      send(rank, etcd::kv::kRangePath, etcd::kv::range(rank.key).dump(), false);
      return;
    case OpKind::kAdd: {
      rank.phase = Rank::Phase::kAddRead;
      rank.add.emplace(rank.counter, 1, etcd::markerKey(clientId_, markerSeq_++));
      const etcd::EtcdRequest req = rank.add->read();
      send(rank, req.path, req.body.dump(), false);
      return;
    }
  }
}

void EtcdEventClients::onOpAnswer(Rank& rank, const void* a) {
  const Json& answer = *static_cast<const Json*>(a);
  try {
    if (rank.phase == Rank::Phase::kAddRead) {
      rank.add->onRead(answer);
      rank.phase = Rank::Phase::kAddTxn;
      send(rank, etcd::kv::kTxnPath, rank.add->txn(lease_).body.dump(), false);
      return;
    }
    if (rank.phase == Rank::Phase::kAddTxn && !rank.add->onTxn(answer)) {
      send(rank, etcd::kv::kTxnPath, rank.add->txn(lease_).body.dump(), false);  // lost a race
      return;
    }
  } catch (const std::exception& ex) {
    fail(rank, ex.what());
    return;
  }
  ++opsDone_;
  if (monotonicNs() < opEndNs_) {
    startOp(rank);
  } else {
    settle(rank);
  }
}

void EtcdEventClients::startBarrier(const std::string& name, uint64_t generation, int worldSize,
                                    bool holdLast, BarrierTimes* times) {
  *times = BarrierTimes{};
  runInLoop([&] {
    name_ = name;
    generation_ = generation;
    worldSize_ = worldSize;
    {
      std::lock_guard<std::mutex> lock(mu_);
      pending_ = ranks_.size();
    }
    times->firstSendNs = monotonicNs();
    const size_t n = ranks_.size() - (holdLast ? 1 : 0);
    for (size_t i = 0; i < ranks_.size(); ++i) {
      Rank& r = *ranks_[i];
      r.released = false;
      r.failed = false;
      r.error.clear();
      r.sendNs = 0;
      if (i < n) {
        startArrival(r);
      }
    }
    times->lastSendNs = monotonicNs();
  });
}

void EtcdEventClients::startHeld(BarrierTimes* times) {
  runInLoop([&] {
    startArrival(*ranks_.back());
    times->lastSendNs = ranks_.back()->sendNs;
  });
}

void EtcdEventClients::awaitReleases(BarrierTimes* times) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return pending_ == 0; });
  }
  runInLoop([&] {
    for (auto& r : ranks_) {
      if (r->failed) {
        if (times->errors++ == 0) {
          std::fprintf(stderr, "resilient-store-bench: rank %d: %s\n", r->rank, r->error.c_str());
        }
        continue;
      }
      if (!r->released) {
        continue;
      }
      if (times->released == 0 || r->releaseNs < times->firstReleaseNs) {
        times->firstReleaseNs = r->releaseNs;
      }
      times->lastReleaseNs = std::max(times->lastReleaseNs, r->releaseNs);
      times->lastSendNs = std::max(times->lastSendNs, r->sendNs);
      ++times->released;
    }
  });
}

void EtcdEventClients::grantMarkerLease() {
  // As EtcdStore grants it: a lease that outlives any retry of an add (the
  // benchmark's clients time out after 600 s). Granted again before each add
  // window, as EtcdStore renews its own, since a 16k-rank run can outlast it.
  ClientOptions o;
  o.memberTimeout = Millis(10000);
  etcd::Rpc rpc(endpoints_, o);
  const Json answer = rpc.call(etcd::kv::kLeaseGrantPath,
                               etcd::kv::leaseGrant(etcd::markerLeaseSeconds(Millis(600000))),
                               SteadyClock::now() + Millis(30000));
  lease_ = etcd::jsonInt(answer, "ID");
}

uint64_t EtcdEventClients::runOps(const std::string& op, int durationMs) {
  if (op == "add") {
    grantMarkerLease();  // before the loop thread reads lease_ (runInLoop orders it)
  }
  runInLoop([&] {
    op_ = op == "set" ? OpKind::kSet : op == "get" ? OpKind::kGet : OpKind::kAdd;
    opsDone_ = 0;
    opErrors_ = 0;
    firstError_.clear();
    opEndNs_ = monotonicNs() + static_cast<uint64_t>(durationMs) * 1000000ull;
    {
      std::lock_guard<std::mutex> lock(mu_);
      pending_ = ranks_.size();
    }
    for (auto& r : ranks_) {
      startOp(*r);
    }
  });
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return pending_ == 0; });
  }
  uint64_t done = 0;
  uint64_t errors = 0;
  std::string first;
  runInLoop([&] {
    done = opsDone_;
    errors = opErrors_;
    first = firstError_;
  });
  if (errors > 0) {
    throw std::runtime_error(std::to_string(errors) + " etcd operations failed; first: " + first);
  }
  return done;
}

}  // namespace resilient::store::bench
