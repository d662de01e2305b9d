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
#include "plugin/transport/request_pool.h"

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
// A request handed to the owner: the inner request and what the rules did to
// it. A slot of its comm's pool; back in the pool once reported done.
struct FaultTransport::WrappedRequest final : public Request {
  Status test(int* isDone, int* outSizes) override;

  Core* core = nullptr;
  Request* inner = nullptr;
  int* sizes = nullptr;  // comm-owned, 1 (send) or maxSizes (receive) ints
  int n = 0;             // sizes to report: 1 (send), n (receive), 0 (flush)
  bool flush = false;
  bool innerDone = false;  // the inner transport reported it complete
  uint64_t ruleMask = 0;   // request rules (stall, delay, slow) that caught it: bits of Core::rules
  uint64_t postNs = 0;
  uint64_t releaseNs = 0;  // reported done no earlier than this
  size_t sendBytes = 0;

  // Starts tracking `innerRequest`: `count` sizes to report, caught by the
  // request rules in `mask`, posted at `nowNs` (0 when no rule needs it).
  void start(Request* innerRequest, int count, uint64_t mask, uint64_t nowNs) noexcept {
    inner = innerRequest;
    n = count;
    flush = false;
    innerDone = false;
    ruleMask = mask;
    postNs = nowNs;
    releaseNs = 0;
  }
};

// What the send and receive decorators share: the inner comm, the rules as
// this comm sees them, and the request pool.
struct FaultTransport::Core {
  // Outstanding requests: NCCL's per-comm bound; a sender must allow one per
  // receive of a grouped irecv, a receiver has flushes besides its receives.
  Core(FaultTransport* t, std::unique_ptr<Comm> innerComm, bool send, int maxRecvs)
      : owner(t),
        inner(std::move(innerComm)),
        isSend(send),
        consumes(!send && t->inner_->capabilities().irecvConsumed),
        maxSizes(send ? 1 : maxRecvs),
        pool(static_cast<size_t>(send ? kMaxRequests * maxRecvs : 2 * kMaxRequests)),
        sizeStorage(pool.size() * static_cast<size_t>(maxSizes)) {
    for (size_t i = 0; i < pool.size(); ++i) {
      WrappedRequest& r = pool.slots()[i];
      r.core = this;
      r.sizes = sizeStorage.data() + i * static_cast<size_t>(maxSizes);
    }
  }
  Core(const Core&) = delete;
  Core& operator=(const Core&) = delete;

  bool full() const noexcept { return pool.outstanding() == pool.size(); }
  // Closes the inner comm for good (a close rule, or the owner's close).
  Status closeInner() {
    if (innerClosed) {
      return {};
    }
    innerClosed = true;
    passthrough = false;
    return inner->close();
  }

  Status regMr(std::byte* data, size_t size, int type, std::unique_ptr<MemoryRegion>* region) {
    if (innerClosed) {
      region->reset();
      return failed;
    }
    return inner->regMr(data, size, type, region);
  }
  Status regMrDmaBuf(std::byte* data, size_t size, int type, uint64_t offset, int fd,
                     std::unique_ptr<MemoryRegion>* region) {
    if (innerClosed) {
      region->reset();
      return failed;
    }
    return inner->regMrDmaBuf(data, size, type, offset, fd, region);
  }
  Status deregMr(std::unique_ptr<MemoryRegion> region) {
    if (innerClosed) {
      return {};  // the inner comm, and with it its registrations, is gone
    }
    return inner->deregMr(std::move(region));
  }
  Status getDeviceMr(MemoryRegion* region, DeviceRegion** deviceRegion) {
    if (innerClosed) {
      *deviceRegion = nullptr;
      return failed;
    }
    return inner->getDeviceMr(region, deviceRegion);
  }
  DeviceHandle* deviceHandle() const noexcept { return inner->deviceHandle(); }
  // A completed request goes back to the pool, except a receive of an inner
  // comm with irecvConsumed, which stays out until that call passes it on.
  void completed(WrappedRequest& r) noexcept {
    if (!consumes || r.flush) {
      pool.release(&r);
    }
  }
  Status close() {
    if (innerClosed) {
      return {};  // closed by a close rule already
    }
    return closeInner();
  }
  bool bytesMoved(uint64_t* bytes) noexcept { return !innerClosed && inner->bytesMoved(bytes); }
  bool endpoints(Endpoint* l, Endpoint* p) const noexcept {
    if (!haveEndpoints) {
      return false;
    }
    *l = local;
    *p = peer;
    return true;
  }

  FaultTransport* owner;
  std::unique_ptr<Comm> inner;
  const bool isSend;
  const bool consumes;      // receive comm of an inner transport with irecvConsumed
  bool passthrough = true;  // no data rule applies: forward each call
  bool innerClosed = false;
  Status failed;  // sticky injected error or close
  Endpoint local;
  Endpoint peer;
  bool haveEndpoints = false;
  std::vector<RuleState> rules;  // the data rules that apply to this comm
  const int maxSizes;
  RequestPool<WrappedRequest> pool;
  std::vector<int> sizeStorage;
};

class FaultTransport::FaultSendComm final : public CommOver<SendComm, Core> {
 public:
  FaultSendComm(FaultTransport* t, std::unique_ptr<SendComm> innerComm, int maxRecvs)
      : CommOver(t, std::move(innerComm), true, maxRecvs) {}

  Status isend(std::byte* data, size_t size, int tag, MemoryRegion* region, ProfilerHandle* phandle,
               Request** request) override;
  bool linkBacklogged(bool* backlogged) noexcept override;

  // The inner comm, as the send comm it is.
  SendComm& innerSend() noexcept { return static_cast<SendComm&>(*state.inner); }
};

class FaultTransport::FaultRecvComm final : public CommOver<RecvComm, Core> {
 public:
  FaultRecvComm(FaultTransport* t, std::unique_ptr<RecvComm> innerComm, int maxRecvs)
      : CommOver(t, std::move(innerComm), false, maxRecvs) {}

  Status irecv(int n, std::byte** data, const size_t* sizes, const int* tags,
               MemoryRegion** regions, ProfilerHandle** phandles, Request** request) override;
  Status iflush(int n, std::byte** data, const int* sizes, MemoryRegion** regions,
                Request** request) override;
  // The inner comm's irecvConsumed with the inner request; the request then
  // goes back to the pool.
  Status irecvConsumed(int n, Request* request) override;

  // The inner comm, as the receive comm it is.
  RecvComm& innerRecv() noexcept { return static_cast<RecvComm&>(*state.inner); }
};

class FaultTransport::FaultListener final : public Listener {
 public:
  FaultListener(FaultTransport* t, std::unique_ptr<Listener> innerListener, int device)
      : owner(t), inner(std::move(innerListener)), dev(device) {}

  Status accept(DeviceHandleRequest wantDeviceHandle, std::unique_ptr<RecvComm>* comm) override;
  Status close() override {
    if (parked != nullptr) {
      (void)parked->close();
      parked.reset();
    }
    return inner->close();
  }

  FaultTransport* owner;
  std::unique_ptr<Listener> inner;
  int dev = 0;
  std::unique_ptr<RecvComm> parked;  // an accepted inner comm held back by a stall rule
  size_t parkedRule = 0;             // its slot in connectRules_
};

struct FaultTransport::Parked {
  int dev = 0;
  std::array<std::byte, kHandleSize> handle{};
  std::unique_ptr<SendComm> inner;
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
    (void)p.inner->close();
  }
  parked_.clear();
}

Status FaultTransport::initContext(uint64_t commId, const CommConfig& config,
                                   std::unique_ptr<Context>* ctx) {
  return inner_->initContext(commId, config, ctx);
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

int FaultTransport::maxRecvs(int dev) {
  Properties props;
  if (inner_->properties(dev, &props).ok()) {
    return std::clamp(props.maxRecvs, 1, kMaxSizesPerRequest);
  }
  return 1;
}

void FaultTransport::setUp(Core& core, const Endpoint& local, const Endpoint& peer,
                           bool haveEndpoints) {
  core.local = local;
  core.peer = peer;
  core.haveEndpoints = haveEndpoints;
  for (size_t i = 0; i < rules_.size(); ++i) {
    if (isDataOp(rules_[i].op) && appliesToComm(rules_[i], core.isSend, peer)) {
      RuleState state;
      state.rule = i;
      state.random = rules_[i].seed;
      core.rules.push_back(state);
    }
  }
  core.passthrough = core.rules.empty();
}

void FaultTransport::closeInner(Core& core) {
  const Status s = core.closeInner();
  if (!s.ok()) {
    RES_INFO(NCCL_NET, "fault injection: closing the inner comm to %s: %s", peerText(core.peer),
             s.toString().c_str());
  }
}

size_t FaultTransport::evaluateCall(Core& core, FaultOp op, uint64_t nowNs, uint64_t* dataFaults) {
  const char* where = core.isSend ? "send comm" : "receive comm";
  size_t acting = core.rules.size();
  *dataFaults = 0;
  for (size_t i = 0; i < core.rules.size(); ++i) {
    const FaultRule& rule = rules_[core.rules[i].rule];
    if (!watches(rule, op) || !evaluate(core.rules[i], nowNs, where, peerText(core.peer))) {
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

Status FaultTransport::inject(Core& core, size_t ruleSlot) {
  const size_t index = core.rules[ruleSlot].rule;
  const FaultRule& rule = rules_[index];
  const std::string& message = errorMessages_[index];
  if (rule.kind == FaultKind::kClose) {
    closeInner(core);
    core.failed = remoteError(message, core.peer.text);
  } else if (rule.error == InjectedError::kSystem) {
    core.failed = Status::error(ErrorKind::kSystem, message, 0, core.peer.text);
  } else {
    core.failed = remoteError(message, core.peer.text);
  }
  core.passthrough = false;
  return core.failed;
}

std::unique_ptr<SendComm> FaultTransport::wrapAdmitted(std::unique_ptr<SendComm> inner, int dev) {
  Endpoint local;
  Endpoint peer;
  const bool haveEndpoints = inner->endpoints(&local, &peer);
  auto comm = std::make_unique<FaultSendComm>(this, std::move(inner), maxRecvs(dev));
  setUp(comm->state, local, peer, haveEndpoints);
  return comm;
}

std::unique_ptr<RecvComm> FaultTransport::wrapAdmitted(std::unique_ptr<RecvComm> inner, int dev) {
  Endpoint local;
  Endpoint peer;
  const bool haveEndpoints = inner->endpoints(&local, &peer);
  auto comm = std::make_unique<FaultRecvComm>(this, std::move(inner), maxRecvs(dev));
  setUp(comm->state, local, peer, haveEndpoints);
  return comm;
}

size_t FaultTransport::actingConnectRule(bool isSend, const Endpoint& peer) {
  // The first connect/accept rule that acts on this connection decides.
  const FaultOp op = isSend ? FaultOp::kConnect : FaultOp::kAccept;
  size_t acting = connectRules_.size();
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
  return acting;
}

Status FaultTransport::refuse(Comm& inner, size_t acting, const Endpoint& peer) {
  const FaultRule& rule = rules_[connectRules_[acting].rule];
  const std::string& message = errorMessages_[connectRules_[acting].rule];
  const Status closed = inner.close();
  if (!closed.ok()) {
    RES_INFO(NCCL_NET, "fault injection: closing the inner comm to %s: %s", peerText(peer),
             closed.toString().c_str());
  }
  return rule.error == InjectedError::kSystem
             ? Status::error(ErrorKind::kSystem, message, 0, peer.text)
             : remoteError(message, peer.text);
}

Status FaultTransport::admit(std::unique_ptr<SendComm> inner, int dev, const std::byte* handle,
                             std::unique_ptr<SendComm>* out) {
  Endpoint local;
  Endpoint peer;
  const bool haveEndpoints = inner->endpoints(&local, &peer);
  size_t acting = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    acting = actingConnectRule(true, peer);
    if (acting != connectRules_.size() &&
        rules_[connectRules_[acting].rule].kind == FaultKind::kStall) {
      Parked p;
      p.dev = dev;
      std::memcpy(p.handle.data(), handle, std::min(inner_->handleBytes(), kHandleSize));
      p.inner = std::move(inner);
      p.rule = acting;
      parked_.push_back(std::move(p));
      return {};  // *out stays empty: still connecting
    }
  }
  if (acting != connectRules_.size() &&
      rules_[connectRules_[acting].rule].kind == FaultKind::kError) {
    return refuse(*inner, acting, peer);
  }
  auto comm = std::make_unique<FaultSendComm>(this, std::move(inner), maxRecvs(dev));
  setUp(comm->state, local, peer, haveEndpoints);
  if (acting != connectRules_.size()) {
    // kClose: the connection is handed out already closed; every call on it fails.
    closeInner(comm->state);
    comm->state.failed = remoteError(errorMessages_[connectRules_[acting].rule], peer.text);
  }
  *out = std::move(comm);
  return {};
}

Status FaultTransport::admit(std::unique_ptr<RecvComm> inner, FaultListener& listener,
                             std::unique_ptr<RecvComm>* out) {
  Endpoint local;
  Endpoint peer;
  const bool haveEndpoints = inner->endpoints(&local, &peer);
  size_t acting = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    acting = actingConnectRule(false, peer);
    if (acting != connectRules_.size() &&
        rules_[connectRules_[acting].rule].kind == FaultKind::kStall) {
      listener.parked = std::move(inner);
      listener.parkedRule = acting;
      return {};  // *out stays empty: still accepting
    }
  }
  if (acting != connectRules_.size() &&
      rules_[connectRules_[acting].rule].kind == FaultKind::kError) {
    return refuse(*inner, acting, peer);
  }
  auto comm = std::make_unique<FaultRecvComm>(this, std::move(inner), maxRecvs(listener.dev));
  setUp(comm->state, local, peer, haveEndpoints);
  if (acting != connectRules_.size()) {
    // kClose: the connection is handed out already closed; every call on it fails.
    closeInner(comm->state);
    comm->state.failed = remoteError(errorMessages_[connectRules_[acting].rule], peer.text);
  }
  *out = std::move(comm);
  return {};
}

Status FaultTransport::listen(Context* ctx, int dev, std::byte* handle,
                              std::unique_ptr<Listener>* listener) {
  if (direct_) {
    return inner_->listen(ctx, dev, handle, listener);
  }
  listener->reset();
  std::unique_ptr<Listener> inner;
  RESILIENT_TRY(inner_->listen(ctx, dev, handle, &inner));
  *listener = std::make_unique<FaultListener>(this, std::move(inner), dev);
  return {};
}

Status FaultTransport::connect(Context* ctx, int dev, std::byte* handle,
                               DeviceHandleRequest wantDeviceHandle,
                               std::unique_ptr<SendComm>* comm) {
  if (direct_) {
    return inner_->connect(ctx, dev, handle, wantDeviceHandle, comm);
  }
  comm->reset();
  const size_t handleBytes = std::min(inner_->handleBytes(), kHandleSize);
  std::unique_ptr<SendComm> resumed;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = parked_.begin(); it != parked_.end(); ++it) {
      if (it->dev != dev || std::memcmp(it->handle.data(), handle, handleBytes) != 0) {
        continue;
      }
      if (stillActive(connectRules_[it->rule], now())) {
        return {};  // stalled: still connecting
      }
      resumed = std::move(it->inner);
      parked_.erase(it);
      break;
    }
  }
  if (resumed != nullptr) {
    *comm = wrapAdmitted(std::move(resumed), dev);
    return {};
  }
  std::unique_ptr<SendComm> inner;
  RESILIENT_TRY(inner_->connect(ctx, dev, handle, wantDeviceHandle, &inner));
  if (inner == nullptr) {
    return {};
  }
  return admit(std::move(inner), dev, handle, comm);
}

Status FaultTransport::FaultListener::accept(DeviceHandleRequest wantDeviceHandle,
                                             std::unique_ptr<RecvComm>* comm) {
  comm->reset();
  if (parked != nullptr) {
    {
      std::lock_guard<std::mutex> lock(owner->mutex_);
      if (owner->stillActive(owner->connectRules_[parkedRule], owner->now())) {
        return {};  // stalled: still accepting
      }
    }
    *comm = owner->wrapAdmitted(std::move(parked), dev);
    return {};
  }
  std::unique_ptr<RecvComm> innerComm;
  RESILIENT_TRY(inner->accept(wantDeviceHandle, &innerComm));
  if (innerComm == nullptr) {
    return {};
  }
  return owner->admit(std::move(innerComm), *this, comm);
}

// ---- data path -------------------------------------------------------------

Status FaultTransport::FaultSendComm::isend(std::byte* data, size_t size, int tag,
                                            MemoryRegion* region, ProfilerHandle* phandle,
                                            Request** request) {
  Core& c = state;
  *request = nullptr;
  if (c.passthrough) {
    WrappedRequest* r = c.pool.acquire();
    if (r == nullptr) {
      return {};  // retry
    }
    Request* innerRequest = nullptr;
    Status s = innerSend().isend(data, size, tag, region, phandle, &innerRequest);
    if (!s.ok() || innerRequest == nullptr) {
      c.pool.release(r);
      return s;
    }
    r->start(innerRequest, 1, 0, 0);
    *request = r;
    return {};
  }

  if (!c.failed.ok()) {
    return c.failed;
  }
  if (c.full()) {
    return {};  // retry
  }
  FaultTransport& t = *c.owner;
  const uint64_t nowNs = t.now();
  uint64_t mask = 0;
  const size_t acting = t.evaluateCall(c, FaultOp::kIsend, nowNs, &mask);
  if (acting != c.rules.size()) {
    return t.inject(c, acting);
  }
  Request* innerRequest = nullptr;
  Status s = innerSend().isend(data, size, tag, region, phandle, &innerRequest);
  if (!s.ok() || innerRequest == nullptr) {
    return s;
  }
  WrappedRequest* r = c.pool.acquire();
  r->start(innerRequest, 1, mask, nowNs);
  r->sizes[0] = static_cast<int>(std::min<size_t>(size, std::numeric_limits<int>::max()));
  r->sendBytes = size;
  *request = r;
  return {};
}

Status FaultTransport::FaultRecvComm::irecv(int n, std::byte** data, const size_t* sizes,
                                            const int* tags, MemoryRegion** regions,
                                            ProfilerHandle** phandles, Request** request) {
  Core& c = state;
  // *request may hold what the caller left there; the inner transport sees it, as it
  // would without the decorator.
  Request* innerRequest = *request;
  *request = nullptr;
  if (c.passthrough) {
    WrappedRequest* r = c.pool.acquire();
    if (r == nullptr) {
      return {};  // retry
    }
    Status s = innerRecv().irecv(n, data, sizes, tags, regions, phandles, &innerRequest);
    if (!s.ok() || innerRequest == nullptr) {
      c.pool.release(r);
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
  if (c.full()) {
    return {};  // retry
  }
  FaultTransport& t = *c.owner;
  const uint64_t nowNs = t.now();
  uint64_t mask = 0;
  const size_t acting = t.evaluateCall(c, FaultOp::kIrecv, nowNs, &mask);
  if (acting != c.rules.size()) {
    return t.inject(c, acting);
  }
  Status s = innerRecv().irecv(n, data, sizes, tags, regions, phandles, &innerRequest);
  if (!s.ok() || innerRequest == nullptr) {
    return s;
  }
  WrappedRequest* r = c.pool.acquire();
  r->start(innerRequest, n, mask, nowNs);
  std::fill_n(r->sizes, n, 0);
  r->sendBytes = 0;
  *request = r;
  return {};
}

Status FaultTransport::FaultRecvComm::iflush(int n, std::byte** data, const int* sizes,
                                             MemoryRegion** regions, Request** request) {
  Core& c = state;
  *request = nullptr;
  if (!c.failed.ok()) {
    return c.failed;
  }
  if (c.full()) {
    // A null flush request means "nothing to wait for": never answer that for want of a slot.
    return internalError("fault injection: request pool exhausted on iflush");
  }
  Request* innerRequest = nullptr;
  Status s = innerRecv().iflush(n, data, sizes, regions, &innerRequest);
  if (!s.ok() || innerRequest == nullptr) {
    return s;
  }
  WrappedRequest* r = c.pool.acquire();
  r->start(innerRequest, 0, 0, 0);
  r->flush = true;
  *request = r;
  return {};
}

Status FaultTransport::WrappedRequest::test(int* isDone, int* outSizes) {
  if (core->passthrough) {
    Status s = inner->test(isDone, outSizes);
    if (s.ok() && *isDone != 0) {
      core->completed(*this);
    }
    return s;
  }
  return core->owner->testWrapped(*this, isDone, outSizes);
}

Status FaultTransport::testWrapped(WrappedRequest& r, int* done, int* sizes) {
  Core& c = *r.core;
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
    RESILIENT_TRY(r.inner->test(&innerDone, r.flush ? nullptr : r.sizes));
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
  c.completed(r);
  return {};
}

Status FaultTransport::FaultRecvComm::irecvConsumed(int n, Request* request) {
  Core& c = state;
  if (!c.consumes || request == nullptr) {
    return {};
  }
  // Requests the caller passes back are this comm's (irecv handed them out).
  auto* r = static_cast<WrappedRequest*>(request);
  Status s = c.innerClosed ? Status() : innerRecv().irecvConsumed(n, r->inner);
  c.pool.release(r);
  return s;
}

// ---- observations ------------------------------------------------------------

bool FaultTransport::FaultSendComm::linkBacklogged(bool* backlogged) noexcept {
  // A slow rule is this link's network: backlogged while its pace runs
  // ahead of the clock.
  const uint64_t now = state.owner->clock_();
  for (RuleState& rule : state.rules) {
    if (state.owner->rules_[rule.rule].kind == FaultKind::kSlow &&
        std::atomic_ref<uint64_t>(rule.paceNs).load(std::memory_order_relaxed) > now) {
      *backlogged = true;
      return true;
    }
  }
  return !state.innerClosed && innerSend().linkBacklogged(backlogged);
}

}  // namespace resilient::transport::fault
