// A Transport decorator that injects the faults of a parsed spec (spec.h,
// docs/fault-injection.md) into an inner transport it owns: stalls, errors,
// closed connections, added latency and throughput caps, on chosen calls,
// comms and peers, armed by call count or by time.
//
// Faults act only inside calls on the comm (no background thread): a rule
// armed by time takes effect at the first matching call after its time.
//
// Cost: with no rules at all the inner transport's own listeners and comms
// are handed out (its calls never pass through here). With rules, every
// listener, comm and request is a decorator over the inner one, and memory
// regions pass through unchanged; a comm that no data rule applies to (by
// direction and peer) forwards each call after one branch, and its requests
// come from the comm's own pool, made with it. Faulted comms read the clock
// once per call. The data path takes no locks and does not allocate (an
// injected error builds its Status once, when the comm fails). connect/accept
// rules share state under a mutex (not the data path).
//
// Threading follows the Transport contract: calls on one comm come from one
// thread at a time; the clock must be callable from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "plugin/transport/fault/spec.h"
#include "plugin/transport/transport.h"

namespace resilient::transport::fault {

// Monotonic nanoseconds. Tests pass a fake; it must be thread-safe.
using Clock = std::function<uint64_t()>;

class FaultTransport final : public Transport {
 public:
  // `clock` defaults to monotonicNs (common/clock.h). Times of at= rules
  // count from this call.
  FaultTransport(std::unique_ptr<Transport> inner, std::vector<FaultRule> rules, Clock clock = {});
  ~FaultTransport() override;
  FaultTransport(const FaultTransport&) = delete;
  FaultTransport& operator=(const FaultTransport&) = delete;

  Transport& inner() noexcept { return *inner_; }
  const std::vector<FaultRule>& rules() const noexcept { return rules_; }

  const char* name() const noexcept override { return name_.c_str(); }
  Status initContext(uint64_t commId, const CommConfig& config,
                     std::unique_ptr<Context>* ctx) override;
  Status devices(int* ndev) override;
  Status properties(int dev, Properties* props) override;
  size_t handleBytes() const noexcept override;

  Status listen(Context* ctx, int dev, std::byte* handle,
                std::unique_ptr<Listener>* listener) override;
  Status connect(Context* ctx, int dev, std::byte* handle, DeviceHandleRequest wantDeviceHandle,
                 std::unique_ptr<SendComm>* comm) override;
  // The inner transport's optional calls, passed through (no rule acts on them).
  Capabilities capabilities() const noexcept override { return inner_->capabilities(); }
  // The inner CollNet, unchanged: the rules apply to the net's point-to-point comms.
  CollNet* collNet() noexcept override { return inner_->collNet(); }
  Status makeVDevice(const VirtualDevice& props, int* dev) override {
    return inner_->makeVDevice(props, dev);
  }
  Status setNetAttr(Context* ctx, NetAttributes* attr) override {
    return inner_->setNetAttr(ctx, attr);
  }

 private:
  struct RuleState;
  struct WrappedRequest;
  struct Core;
  class FaultListener;
  class FaultSendComm;
  class FaultRecvComm;
  struct Parked;

  uint64_t now() const { return clock_(); }
  // Counts the call for the rule, arms it when due and says whether it acts
  // on this call (armed, not expired, prob draw passed).
  bool evaluate(RuleState& state, uint64_t nowNs, const char* where, const char* peer);
  bool stillActive(RuleState& state, uint64_t nowNs) const;
  static uint64_t paceCompletion(RuleState& state, uint64_t rateBytesPerS, uint64_t nowNs,
                                 uint64_t bytes);

  // The largest grouped receive of the inner transport's device `dev` (the
  // size of a decorator's request pool).
  int maxRecvs(int dev);
  // Gives a new decorator its endpoints and the data rules that apply to it.
  void setUp(Core& core, const Endpoint& local, const Endpoint& peer, bool haveEndpoints);
  // Closes the inner comm of a decorator for good, logging a failure.
  void closeInner(Core& core);
  // The decorator of an admitted inner comm, with the inner comm's endpoints.
  std::unique_ptr<SendComm> wrapAdmitted(std::unique_ptr<SendComm> inner, int dev);
  std::unique_ptr<RecvComm> wrapAdmitted(std::unique_ptr<RecvComm> inner, int dev);
  // Applies the connect/accept rules to a comm the inner transport produced:
  // hands out its decorator, parks it (stall: *out stays empty) or fails.
  Status admit(std::unique_ptr<SendComm> inner, int dev, const std::byte* handle,
               std::unique_ptr<SendComm>* out);
  Status admit(std::unique_ptr<RecvComm> inner, FaultListener& listener,
               std::unique_ptr<RecvComm>* out);
  // The first connect/accept rule that acts on a connection to `peer`, or
  // connectRules_.size(). Caller holds mutex_.
  size_t actingConnectRule(bool isSend, const Endpoint& peer);
  // The error of connect/accept rule slot `acting`, after closing `inner`.
  Status refuse(Comm& inner, size_t acting, const Endpoint& peer);
  // Evaluates the comm's rules that watch `op` for this call: the slot of the
  // first call fault (error, close) that acts, or core.rules.size() when none;
  // *dataFaults gets one bit per other rule that acts (stall, delay, slow).
  size_t evaluateCall(Core& core, FaultOp op, uint64_t nowNs, uint64_t* dataFaults);
  // Fails the comm with the error or close rule in its slot `ruleSlot`.
  Status inject(Core& core, size_t ruleSlot);
  Status testWrapped(WrappedRequest& request, int* done, int* sizes);

  std::unique_ptr<Transport> inner_;
  const std::vector<FaultRule> rules_;
  std::vector<std::string> descriptions_;   // describe(rule), per rule
  std::vector<std::string> errorMessages_;  // "injected fault: <rule>", per rule
  const Clock clock_;
  const uint64_t createdNs_;
  const bool direct_;  // no rules: hand out the inner objects themselves
  std::string name_;

  std::mutex mutex_;  // guards connectRules_ and parked_ (connect/accept only)
  std::vector<RuleState> connectRules_;
  std::vector<Parked> parked_;  // stalled connects, keyed by dev and handle bytes
};

}  // namespace resilient::transport::fault
