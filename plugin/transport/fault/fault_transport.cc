#include "plugin/transport/fault/fault_transport.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "common/clock.h"
#include "common/log.h"

namespace resilient::transport::fault {
namespace {

constexpr uint64_t kNsPerMs = 1000000;
constexpr int kMaxSizesPerRequest = 64;  // NCCL_PROXY_MAX_SUBS, the bound of irecv's n

bool isDataOp(FaultOp op) {
  return op != FaultOp::kConnect && op != FaultOp::kAccept;
}

bool isCallFault(FaultKind kind) {
  return kind == FaultKind::kError || kind == FaultKind::kClose;
}

// Does `rule` watch calls of `op` (isend, irecv or test)?
bool watches(const FaultRule& rule, FaultOp op) {
  if (op == FaultOp::kTest) {
    return rule.op == FaultOp::kTest;
  }
  return rule.op == op || rule.op == FaultOp::kAny;
}

bool appliesToComm(const FaultRule& rule, bool isSend, const Endpoint& peer) {
  if (rule.dir == FaultDir::kSend && !isSend) {
    return false;
  }
  if (rule.dir == FaultDir::kRecv && isSend) {
    return false;
  }
  if ((rule.op == FaultOp::kIsend || rule.op == FaultOp::kConnect) && !isSend) {
    return false;
  }
  if ((rule.op == FaultOp::kIrecv || rule.op == FaultOp::kAccept) && isSend) {
    return false;
  }
  return rule.peer.empty() || std::strstr(peer.text, rule.peer.c_str()) != nullptr;
}

// splitmix64: a tiny, well-mixed generator; one 64-bit word of state per rule and comm.
uint64_t nextRandom(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform in [0, 1).
double nextUnit(uint64_t* state) {
  return static_cast<double>(nextRandom(state) >> 11) * 0x1.0p-53;
}

// Requests record the rules that caught them in a 64-bit mask.
std::vector<FaultRule> limitRules(std::vector<FaultRule> rules) {
  if (rules.size() > kMaxFaultRules) {
    RES_WARN(NCCL_NET, "fault injection: %zu rules given, only the first %zu are used",
             rules.size(), kMaxFaultRules);
    rules.resize(kMaxFaultRules);
  }
  return rules;
}

const char* peerText(const Endpoint& peer) {
  return peer.text[0] != '\0' ? peer.text : "unknown peer";
}

}  // namespace

// One rule as one comm (or, for connect/accept rules, the transport) sees it.
struct FaultTransport::RuleState {
  size_t rule = 0;       // index into rules_
  uint64_t calls = 0;    // matching calls counted before arming
  uint64_t armedNs = 0;  // when the rule armed (at= rules: creation + at)
  bool armed = false;
  bool expired = false;  // duration over: inert for good
  uint64_t random = 0;   // prob draws, seeded with the rule's seed
  uint64_t paceNs = 0;   // kSlow: when the paced link is free again
};

// A request handed to the owner: the inner request and what the rules did to it.
struct FaultTransport::WrappedRequest {
  Comm* comm = nullptr;
  void* inner = nullptr;
  WrappedRequest* nextFree = nullptr;
  int* sizes = nullptr;  // comm-owned, 1 (send) or maxSizes (receive) ints
  int n = 0;             // sizes to report: 1 (send), n (receive), 0 (flush)
  bool flush = false;
  bool innerDone = false;  // the inner transport reported it complete
  uint64_t ruleMask = 0;   // request rules (stall, delay, slow) that caught it: bits of Comm::rules
  uint64_t postNs = 0;
  uint64_t releaseNs = 0;  // reported done no earlier than this
  size_t sendBytes = 0;

  // Starts tracking `innerRequest`: `count` sizes to report, caught by the
  // request rules in `mask`, posted at `nowNs` (0 when no rule needs it).
  void start(void* innerRequest, int count, uint64_t mask, uint64_t nowNs) noexcept {
    inner = innerRequest;
    n = count;
    flush = false;
    innerDone = false;
    ruleMask = mask;
    postNs = nowNs;
    releaseNs = 0;
  }
};

struct FaultTransport::Comm {
  void* inner = nullptr;
  bool isSend = true;
  bool passthrough = true;  // no data rule applies: forward each call
  bool innerClosed = false;
  Status failed;  // sticky injected error or close
  Endpoint local;
  Endpoint peer;
  bool haveEndpoints = false;
  std::vector<RuleState> rules;  // the data rules that apply to this comm
  int maxSizes = 1;
  std::vector<WrappedRequest> pool;
  std::vector<int> sizeStorage;
  WrappedRequest* freeList = nullptr;

  WrappedRequest* take() {
    WrappedRequest* r = freeList;
    if (r != nullptr) {
      freeList = r->nextFree;
      r->nextFree = nullptr;
    }
    return r;
  }
  void give(WrappedRequest* r) {
    r->nextFree = freeList;
    freeList = r;
  }
};

struct FaultTransport::Listen {
  void* inner = nullptr;
  int dev = 0;
  void* parked = nullptr;  // an accepted inner comm held back by a stall rule
  size_t parkedRule = 0;   // its slot in connectRules_
};

struct FaultTransport::Parked {
  int dev = 0;
  std::array<unsigned char, kHandleSize> handle{};
  void* inner = nullptr;
  size_t rule = 0;  // slot in connectRules_
};

FaultTransport::FaultTransport(std::unique_ptr<Transport> inner, std::vector<FaultRule> rules,
                               Clock clock)
    : inner_(std::move(inner)),
      rules_(limitRules(std::move(rules))),
      clock_(clock ? std::move(clock) : Clock(&monotonicNs)),
      createdNs_(clock_()),
      direct_(rules_.empty()),
      name_(std::string("fault:") + inner_->name()) {
  for (size_t i = 0; i < rules_.size(); ++i) {
    descriptions_.push_back(describe(rules_[i]));
    errorMessages_.push_back("injected fault: " + descriptions_.back());
    if (!isDataOp(rules_[i].op)) {
      RuleState state;
      state.rule = i;
      state.random = rules_[i].seed;
      connectRules_.push_back(state);
    }
  }
}

FaultTransport::~FaultTransport() {
  for (Parked& p : parked_) {
    (void)inner_->closeSend(p.inner);
  }
}

Status FaultTransport::initContext(uint64_t commId, const CommConfig& config, void** ctx) {
  return inner_->initContext(commId, config, ctx);
}
Status FaultTransport::finalizeContext(void* ctx) {
  return inner_->finalizeContext(ctx);
}
Status FaultTransport::devices(int* ndev) {
  return inner_->devices(ndev);
}
Status FaultTransport::properties(int dev, Properties* props) {
  return inner_->properties(dev, props);
}
size_t FaultTransport::handleBytes() const noexcept {
  return inner_->handleBytes();
}

// ---- rule state ------------------------------------------------------------

bool FaultTransport::evaluate(RuleState& state, uint64_t nowNs, const char* where,
                              const char* peer) {
  if (state.expired) {
    return false;
  }
  const FaultRule& rule = rules_[state.rule];
  if (!state.armed) {
    uint64_t armedNs = nowNs;
    if (rule.hasAt) {
      armedNs = createdNs_ + rule.atMs * kNsPerMs;
      if (nowNs < armedNs) {
        return false;
      }
    } else if (++state.calls <= rule.after) {
      return false;
    }
    state.armed = true;
    state.armedNs = armedNs;
    if (!stillActive(state, nowNs)) {
      return false;  // an at= window that passed before any call saw it
    }
    RES_WARN(NCCL_NET, "fault injection: rule '%s' armed on %s (peer %s)",
             descriptions_[state.rule].c_str(), where, peer);
  }
  if (!stillActive(state, nowNs)) {
    return false;
  }
  return rule.prob >= 1.0 || nextUnit(&state.random) < rule.prob;
}

bool FaultTransport::stillActive(RuleState& state, uint64_t nowNs) const {
  if (!state.armed || state.expired) {
    return false;
  }
  const uint64_t durationMs = rules_[state.rule].durationMs;
  if (durationMs != 0 && nowNs - state.armedNs >= durationMs * kNsPerMs) {
    state.expired = true;
    return false;
  }
  return true;
}

// A virtual link of the given rate: a completion of `bytes` is released once
// the link has carried it after the completions paced before it.
uint64_t FaultTransport::paceCompletion(RuleState& state, uint64_t rateBytesPerS, uint64_t nowNs,
                                        uint64_t bytes) {
  std::atomic_ref<uint64_t> pace(state.paceNs);  // linkBacklogged reads it
  const uint64_t start = std::max(nowNs, pace.load(std::memory_order_relaxed));
  // Rounded up so that the rate is never exceeded; doubles hold any rate and size exactly
  // enough (53 bits) for nanosecond pacing.
  const auto costNs = static_cast<uint64_t>(
      std::ceil(static_cast<double>(bytes) * 1e9 / static_cast<double>(rateBytesPerS)));
  pace.store(start + costNs, std::memory_order_relaxed);
  return start + costNs;
}

// ---- comms -----------------------------------------------------------------

std::unique_ptr<FaultTransport::Comm> FaultTransport::makeComm(void* innerComm, Side side, int dev,
                                                               const Endpoint& local,
                                                               const Endpoint& peer) {
  const bool isSend = side == Side::kSend;
  auto comm = std::make_unique<Comm>();
  comm->inner = innerComm;
  comm->isSend = isSend;
  comm->local = local;
  comm->peer = peer;
  for (size_t i = 0; i < rules_.size(); ++i) {
    if (isDataOp(rules_[i].op) && appliesToComm(rules_[i], isSend, peer)) {
      RuleState state;
      state.rule = i;
      state.random = rules_[i].seed;
      comm->rules.push_back(state);
    }
  }
  comm->passthrough = comm->rules.empty();

  // Outstanding requests: NCCL's per-comm bound; a sender must allow one per
  // receive of a grouped irecv, a receiver has flushes besides its receives.
  int maxRecvs = 1;
  Properties props;
  if (inner_->properties(dev, &props).ok()) {
    maxRecvs = std::clamp(props.maxRecvs, 1, kMaxSizesPerRequest);
  }
  comm->maxSizes = isSend ? 1 : maxRecvs;
  const size_t poolSize = static_cast<size_t>(isSend ? kMaxRequests * maxRecvs : 2 * kMaxRequests);
  comm->pool.resize(poolSize);
  comm->sizeStorage.resize(poolSize * static_cast<size_t>(comm->maxSizes));
  for (size_t i = poolSize; i-- > 0;) {
    WrappedRequest& r = comm->pool[i];
    r.comm = comm.get();
    r.sizes = comm->sizeStorage.data() + i * static_cast<size_t>(comm->maxSizes);
    comm->give(&r);
  }
  return comm;
}

void FaultTransport::closeInner(Comm& comm) {
  if (comm.innerClosed) {
    return;
  }
  const Status s = comm.isSend ? inner_->closeSend(comm.inner) : inner_->closeRecv(comm.inner);
  comm.innerClosed = true;
  comm.passthrough = false;
  if (!s.ok()) {
    RES_INFO(NCCL_NET, "fault injection: closing the inner comm to %s: %s", peerText(comm.peer),
             s.toString().c_str());
  }
}

size_t FaultTransport::evaluateCall(Comm& comm, FaultOp op, uint64_t nowNs, uint64_t* dataFaults) {
  const char* where = comm.isSend ? "send comm" : "receive comm";
  size_t acting = comm.rules.size();
  *dataFaults = 0;
  for (size_t i = 0; i < comm.rules.size(); ++i) {
    const FaultRule& rule = rules_[comm.rules[i].rule];
    if (!watches(rule, op) || !evaluate(comm.rules[i], nowNs, where, peerText(comm.peer))) {
      continue;
    }
    if (isCallFault(rule.kind)) {
      acting = std::min(acting, i);
    } else {
      *dataFaults |= uint64_t{1} << i;
    }
  }
  return acting;
}

Status FaultTransport::inject(Comm& comm, size_t ruleSlot) {
  const size_t index = comm.rules[ruleSlot].rule;
  const FaultRule& rule = rules_[index];
  const std::string& message = errorMessages_[index];
  if (rule.kind == FaultKind::kClose) {
    closeInner(comm);
    comm.failed = remoteError(message, comm.peer.text);
  } else if (rule.error == InjectedError::kSystem) {
    comm.failed = Status::error(ErrorKind::kSystem, message, 0, comm.peer.text);
  } else {
    comm.failed = remoteError(message, comm.peer.text);
  }
  comm.passthrough = false;
  return comm.failed;
}

std::unique_ptr<FaultTransport::Comm> FaultTransport::wrapAdmitted(void* innerComm, Side side,
                                                                   int dev) {
  Endpoint local;
  Endpoint peer;
  const bool haveEndpoints = inner_->endpoints(innerComm, &local, &peer);
  std::unique_ptr<Comm> comm = makeComm(innerComm, side, dev, local, peer);
  comm->haveEndpoints = haveEndpoints;
  return comm;
}

Status FaultTransport::admit(void* innerComm, Side side, int dev, const void* handle,
                             Listen* listen, void** out) {
  const bool isSend = side == Side::kSend;
  Endpoint local;
  Endpoint peer;
  const bool haveEndpoints = inner_->endpoints(innerComm, &local, &peer);
  const FaultOp op = isSend ? FaultOp::kConnect : FaultOp::kAccept;

  // The first connect/accept rule that acts on this connection decides.
  size_t acting = connectRules_.size();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const uint64_t nowNs = now();
    for (size_t i = 0; i < connectRules_.size(); ++i) {
      const FaultRule& rule = rules_[connectRules_[i].rule];
      if (rule.op != op || !appliesToComm(rule, isSend, peer)) {
        continue;
      }
      if (evaluate(connectRules_[i], nowNs, isSend ? "connect" : "accept", peerText(peer)) &&
          acting == connectRules_.size()) {
        acting = i;
      }
    }
    if (acting != connectRules_.size() &&
        rules_[connectRules_[acting].rule].kind == FaultKind::kStall) {
      if (isSend) {
        Parked p;
        p.dev = dev;
        std::memcpy(p.handle.data(), handle, std::min(inner_->handleBytes(), kHandleSize));
        p.inner = innerComm;
        p.rule = acting;
        parked_.push_back(p);
      } else {
        listen->parked = innerComm;
        listen->parkedRule = acting;
      }
      *out = nullptr;
      return {};
    }
  }

  if (acting != connectRules_.size() &&
      rules_[connectRules_[acting].rule].kind == FaultKind::kError) {
    const FaultRule& rule = rules_[connectRules_[acting].rule];
    const std::string& message = errorMessages_[connectRules_[acting].rule];
    const Status closed = isSend ? inner_->closeSend(innerComm) : inner_->closeRecv(innerComm);
    if (!closed.ok()) {
      RES_INFO(NCCL_NET, "fault injection: closing the inner comm to %s: %s", peerText(peer),
               closed.toString().c_str());
    }
    return rule.error == InjectedError::kSystem
               ? Status::error(ErrorKind::kSystem, message, 0, peer.text)
               : remoteError(message, peer.text);
  }

  std::unique_ptr<Comm> comm = makeComm(innerComm, side, dev, local, peer);
  comm->haveEndpoints = haveEndpoints;
  if (acting != connectRules_.size()) {
    // kClose: the connection is handed out already closed; every call on it fails.
    closeInner(*comm);
    comm->failed = remoteError(errorMessages_[connectRules_[acting].rule], peer.text);
  }
  *out = comm.release();
  return {};
}

Status FaultTransport::listen(void* ctx, int dev, void* handle, void** listenComm) {
  if (direct_) {
    return inner_->listen(ctx, dev, handle, listenComm);
  }
  *listenComm = nullptr;
  void* innerListen = nullptr;
  RESILIENT_TRY(inner_->listen(ctx, dev, handle, &innerListen));
  auto l = std::make_unique<Listen>();
  l->inner = innerListen;
  l->dev = dev;
  *listenComm = l.release();
  return {};
}

Status FaultTransport::connect(void* ctx, int dev, void* handle, void** sendComm) {
  if (direct_) {
    return inner_->connect(ctx, dev, handle, sendComm);
  }
  *sendComm = nullptr;
  const size_t handleBytes = std::min(inner_->handleBytes(), kHandleSize);
  void* resumed = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = parked_.begin(); it != parked_.end(); ++it) {
      if (it->dev != dev || std::memcmp(it->handle.data(), handle, handleBytes) != 0) {
        continue;
      }
      if (stillActive(connectRules_[it->rule], now())) {
        return {};  // stalled: still connecting
      }
      resumed = it->inner;
      parked_.erase(it);
      break;
    }
  }
  if (resumed != nullptr) {
    *sendComm = wrapAdmitted(resumed, Side::kSend, dev).release();
    return {};
  }
  void* innerComm = nullptr;
  RESILIENT_TRY(inner_->connect(ctx, dev, handle, &innerComm));
  if (innerComm == nullptr) {
    return {};
  }
  return admit(innerComm, Side::kSend, dev, handle, nullptr, sendComm);
}

Status FaultTransport::accept(void* listenComm, void** recvComm) {
  if (direct_) {
    return inner_->accept(listenComm, recvComm);
  }
  *recvComm = nullptr;
  auto* l = static_cast<Listen*>(listenComm);
  if (l->parked != nullptr) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stillActive(connectRules_[l->parkedRule], now())) {
        return {};  // stalled: still accepting
      }
    }
    void* resumed = l->parked;
    l->parked = nullptr;
    *recvComm = wrapAdmitted(resumed, Side::kRecv, l->dev).release();
    return {};
  }
  void* innerComm = nullptr;
  RESILIENT_TRY(inner_->accept(l->inner, &innerComm));
  if (innerComm == nullptr) {
    return {};
  }
  return admit(innerComm, Side::kRecv, l->dev, nullptr, l, recvComm);
}

Status FaultTransport::regMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  if (direct_) {
    return inner_->regMr(comm, data, size, type, mhandle);
  }
  auto* c = static_cast<Comm*>(comm);
  if (c->innerClosed) {
    *mhandle = nullptr;
    return c->failed;
  }
  return inner_->regMr(c->inner, data, size, type, mhandle);
}

Status FaultTransport::deregMr(void* comm, void* mhandle) {
  if (direct_) {
    return inner_->deregMr(comm, mhandle);
  }
  auto* c = static_cast<Comm*>(comm);
  if (c->innerClosed) {
    return {};  // the inner comm, and with it its registrations, is gone
  }
  return inner_->deregMr(c->inner, mhandle);
}

// ---- data path -------------------------------------------------------------

Status FaultTransport::isend(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                             void* phandle, void** request) {
  if (direct_) {
    return inner_->isend(sendComm, data, size, tag, mhandle, phandle, request);
  }
  Comm& c = *static_cast<Comm*>(sendComm);
  *request = nullptr;
  if (c.passthrough) {
    WrappedRequest* r = c.take();
    if (r == nullptr) {
      return {};  // retry
    }
    void* innerRequest = nullptr;
    Status s = inner_->isend(c.inner, data, size, tag, mhandle, phandle, &innerRequest);
    if (!s.ok() || innerRequest == nullptr) {
      c.give(r);
      return s;
    }
    r->start(innerRequest, 1, 0, 0);
    *request = r;
    return {};
  }

  if (!c.failed.ok()) {
    return c.failed;
  }
  if (c.freeList == nullptr) {
    return {};  // retry
  }
  const uint64_t nowNs = now();
  uint64_t mask = 0;
  const size_t acting = evaluateCall(c, FaultOp::kIsend, nowNs, &mask);
  if (acting != c.rules.size()) {
    return inject(c, acting);
  }
  void* innerRequest = nullptr;
  Status s = inner_->isend(c.inner, data, size, tag, mhandle, phandle, &innerRequest);
  if (!s.ok() || innerRequest == nullptr) {
    return s;
  }
  WrappedRequest* r = c.take();
  r->start(innerRequest, 1, mask, nowNs);
  r->sizes[0] = static_cast<int>(std::min<size_t>(size, std::numeric_limits<int>::max()));
  r->sendBytes = size;
  *request = r;
  return {};
}

Status FaultTransport::irecv(void* recvComm, int n, void** data, const size_t* sizes,
                             const int* tags, void** mhandles, void** phandles, void** request) {
  if (direct_) {
    return inner_->irecv(recvComm, n, data, sizes, tags, mhandles, phandles, request);
  }
  Comm& c = *static_cast<Comm*>(recvComm);
  // *request may hold NCCL's "optional completion" marker; the inner transport sees it.
  void* innerRequest = *request;
  *request = nullptr;
  if (c.passthrough) {
    WrappedRequest* r = c.take();
    if (r == nullptr) {
      return {};  // retry
    }
    Status s = inner_->irecv(c.inner, n, data, sizes, tags, mhandles, phandles, &innerRequest);
    if (!s.ok() || innerRequest == nullptr) {
      c.give(r);
      return s;
    }
    r->start(innerRequest, n, 0, 0);
    *request = r;
    return {};
  }

  if (!c.failed.ok()) {
    return c.failed;
  }
  if (n < 1 || n > c.maxSizes) {
    return internalError("fault injection: irecv with n=" + std::to_string(n) +
                         " receives; the inner transport allows " + std::to_string(c.maxSizes));
  }
  if (c.freeList == nullptr) {
    return {};  // retry
  }
  const uint64_t nowNs = now();
  uint64_t mask = 0;
  const size_t acting = evaluateCall(c, FaultOp::kIrecv, nowNs, &mask);
  if (acting != c.rules.size()) {
    return inject(c, acting);
  }
  Status s = inner_->irecv(c.inner, n, data, sizes, tags, mhandles, phandles, &innerRequest);
  if (!s.ok() || innerRequest == nullptr) {
    return s;
  }
  WrappedRequest* r = c.take();
  r->start(innerRequest, n, mask, nowNs);
  std::fill_n(r->sizes, n, 0);
  r->sendBytes = 0;
  *request = r;
  return {};
}

Status FaultTransport::iflush(void* recvComm, int n, void** data, const int* sizes, void** mhandles,
                              void** request) {
  if (direct_) {
    return inner_->iflush(recvComm, n, data, sizes, mhandles, request);
  }
  Comm& c = *static_cast<Comm*>(recvComm);
  *request = nullptr;
  if (!c.failed.ok()) {
    return c.failed;
  }
  if (c.freeList == nullptr) {
    // A null flush request means "nothing to wait for": never answer that for want of a slot.
    return internalError("fault injection: request pool exhausted on iflush");
  }
  void* innerRequest = nullptr;
  Status s = inner_->iflush(c.inner, n, data, sizes, mhandles, &innerRequest);
  if (!s.ok() || innerRequest == nullptr) {
    return s;
  }
  WrappedRequest* r = c.take();
  r->start(innerRequest, 0, 0, 0);
  r->flush = true;
  *request = r;
  return {};
}

Status FaultTransport::test(void* request, int* done, int* sizes) {
  if (direct_) {
    return inner_->test(request, done, sizes);
  }
  WrappedRequest& r = *static_cast<WrappedRequest*>(request);
  Comm& c = *r.comm;
  if (c.passthrough) {
    Status s = inner_->test(r.inner, done, sizes);
    if (s.ok() && *done != 0) {
      c.give(&r);
    }
    return s;
  }
  return testWrapped(r, done, sizes);
}

Status FaultTransport::testWrapped(WrappedRequest& r, int* done, int* sizes) {
  Comm& c = *r.comm;
  *done = 0;
  if (!c.failed.ok()) {
    return c.failed;
  }
  const uint64_t nowNs = now();

  // Rules on the test call itself (only stall is accepted with op=test).
  uint64_t stalls = 0;
  const size_t acting = evaluateCall(c, FaultOp::kTest, nowNs, &stalls);
  if (acting != c.rules.size()) {
    return inject(c, acting);
  }
  if (stalls != 0) {
    return {};
  }

  // Stall rules that caught the request when it was posted.
  for (uint64_t bits = r.ruleMask; bits != 0; bits &= bits - 1) {
    RuleState& state = c.rules[static_cast<size_t>(__builtin_ctzll(bits))];
    if (rules_[state.rule].kind == FaultKind::kStall && stillActive(state, nowNs)) {
      return {};
    }
  }

  if (!r.innerDone) {
    int innerDone = 0;
    RESILIENT_TRY(inner_->test(r.inner, &innerDone, r.flush ? nullptr : r.sizes));
    if (innerDone == 0) {
      return {};
    }
    r.innerDone = true;
    r.releaseNs = nowNs;
    uint64_t bytes = r.sendBytes;
    if (!c.isSend) {
      bytes = 0;
      for (int i = 0; i < r.n; ++i) {
        bytes += static_cast<uint64_t>(std::max(r.sizes[i], 0));
      }
    }
    for (uint64_t bits = r.ruleMask; bits != 0; bits &= bits - 1) {
      RuleState& state = c.rules[static_cast<size_t>(__builtin_ctzll(bits))];
      const FaultRule& rule = rules_[state.rule];
      if (rule.kind == FaultKind::kDelay) {
        r.releaseNs = std::max(r.releaseNs, r.postNs + rule.delayMs * kNsPerMs);
      } else if (rule.kind == FaultKind::kSlow) {
        r.releaseNs =
            std::max(r.releaseNs, paceCompletion(state, rule.rateBytesPerS, nowNs, bytes));
      }
    }
  }
  if (nowNs < r.releaseNs) {
    return {};
  }
  *done = 1;
  bool reportSizes = true;
  for (uint64_t bits = r.ruleMask; bits != 0; bits &= bits - 1) {
    const RuleState& state = c.rules[static_cast<size_t>(__builtin_ctzll(bits))];
    reportSizes = reportSizes && rules_[state.rule].kind != FaultKind::kNoSizes;
  }
  if (sizes != nullptr && r.n > 0 && reportSizes) {
    std::copy_n(r.sizes, r.n, sizes);
  }
  c.give(&r);
  return {};
}

// ---- teardown and observations ------------------------------------------------

Status FaultTransport::closeSend(void* sendComm) {
  if (direct_) {
    return inner_->closeSend(sendComm);
  }
  std::unique_ptr<Comm> c(static_cast<Comm*>(sendComm));
  if (c->innerClosed) {
    return {};  // closed by a close rule already
  }
  return inner_->closeSend(c->inner);
}

Status FaultTransport::closeRecv(void* recvComm) {
  if (direct_) {
    return inner_->closeRecv(recvComm);
  }
  std::unique_ptr<Comm> c(static_cast<Comm*>(recvComm));
  if (c->innerClosed) {
    return {};
  }
  return inner_->closeRecv(c->inner);
}

Status FaultTransport::closeListen(void* listenComm) {
  if (direct_) {
    return inner_->closeListen(listenComm);
  }
  std::unique_ptr<Listen> l(static_cast<Listen*>(listenComm));
  if (l->parked != nullptr) {
    (void)inner_->closeRecv(l->parked);
  }
  return inner_->closeListen(l->inner);
}

bool FaultTransport::bytesMoved(void* comm, uint64_t* bytes) noexcept {
  if (direct_) {
    return inner_->bytesMoved(comm, bytes);
  }
  auto* c = static_cast<Comm*>(comm);
  return !c->innerClosed && inner_->bytesMoved(c->inner, bytes);
}

bool FaultTransport::linkBacklogged(void* comm, bool* backlogged) noexcept {
  if (direct_) {
    return inner_->linkBacklogged(comm, backlogged);
  }
  auto* c = static_cast<Comm*>(comm);
  // A slow rule is this link's network: backlogged while its pace runs
  // ahead of the clock.
  const uint64_t now = clock_();
  for (RuleState& state : c->rules) {
    if (rules_[state.rule].kind == FaultKind::kSlow &&
        std::atomic_ref<uint64_t>(state.paceNs).load(std::memory_order_relaxed) > now) {
      *backlogged = true;
      return true;
    }
  }
  return !c->innerClosed && inner_->linkBacklogged(c->inner, backlogged);
}

bool FaultTransport::endpoints(void* comm, Endpoint* local, Endpoint* peer) noexcept {
  if (direct_) {
    return inner_->endpoints(comm, local, peer);
  }
  auto* c = static_cast<Comm*>(comm);
  if (!c->haveEndpoints) {
    return false;
  }
  *local = c->local;
  *peer = c->peer;
  return true;
}

}  // namespace resilient::transport::fault
