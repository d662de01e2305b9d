// A Transport decorator that injects the faults of a parsed spec (spec.h,
// docs/fault-injection.md) into an inner transport it owns: stalls, errors,
// closed connections, added latency and throughput caps, on chosen calls,
// comms and peers, armed by call count or by time.
//
// Faults act only inside calls on the comm (no background thread): a rule
// armed by time takes effect at the first matching call after its time.
//
// Cost: with no rules at all every call is forwarded and the inner comm and
// request pointers are handed out unchanged. With rules, every comm and
// request is wrapped; a comm that no data rule applies to (by direction and
// peer) forwards each call after one branch, and its requests come from the
// comm's preallocated pool. Faulted comms read the clock once per call. The
// data path takes no locks and does not allocate (an injected error builds
// its Status once, when the comm fails). connect/accept rules share state
// under a mutex (not the data path).
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
  Status initContext(uint64_t commId, const CommConfig& config, void** ctx) override;
  Status finalizeContext(void* ctx) override;
  Status devices(int* ndev) override;
  Status properties(int dev, Properties* props) override;
  size_t handleBytes() const noexcept override;

  Status listen(void* ctx, int dev, void* handle, void** listenComm) override;
  Status connect(void* ctx, int dev, void* handle, void** sendComm) override;
  Status accept(void* listenComm, void** recvComm) override;

  Status regMr(void* comm, void* data, size_t size, int type, void** mhandle) override;
  Status deregMr(void* comm, void* mhandle) override;

  Status isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,
               void** request) override;
  Status irecv(void* recvComm, int n, void** data, const size_t* sizes, const int* tags,
               void** mhandles, void** phandles, void** request) override;
  Status iflush(void* recvComm, int n, void** data, const int* sizes, void** mhandles,
                void** request) override;
  Status test(void* request, int* done, int* sizes) override;

  Status closeSend(void* sendComm) override;
  Status closeRecv(void* recvComm) override;
  Status closeListen(void* listenComm) override;

  bool bytesMoved(void* comm, uint64_t* bytes) noexcept override;
  bool linkBacklogged(void* comm, bool* backlogged) noexcept override;
  bool endpoints(void* comm, Endpoint* local, Endpoint* peer) noexcept override;

 private:
  struct RuleState;
  struct WrappedRequest;
  struct Comm;
  struct Listen;
  struct Parked;

  uint64_t now() const { return clock_(); }
  // Counts the call for the rule, arms it when due and says whether it acts
  // on this call (armed, not expired, prob draw passed).
  bool evaluate(RuleState& state, uint64_t nowNs, const char* where, const char* peer);
  bool stillActive(RuleState& state, uint64_t nowNs) const;
  static uint64_t paceCompletion(RuleState& state, uint64_t rateBytesPerS, uint64_t nowNs,
                                 uint64_t bytes);

  // Which end of a connection a comm is: connect's send comm, accept's receive comm.
  enum class Side { kSend, kRecv };

  std::unique_ptr<Comm> makeComm(void* innerComm, Side side, int dev, const Endpoint& local,
                                 const Endpoint& peer);
  // makeComm with the inner comm's endpoints.
  std::unique_ptr<Comm> wrapAdmitted(void* innerComm, Side side, int dev);
  // Applies the connect/accept rules to a comm the inner transport produced.
  Status admit(void* innerComm, Side side, int dev, const void* handle, Listen* listen, void** out);
  // Evaluates the comm's rules that watch `op` for this call: the slot of the
  // first call fault (error, close) that acts, or comm.rules.size() when none;
  // *dataFaults gets one bit per other rule that acts (stall, delay, slow).
  size_t evaluateCall(Comm& comm, FaultOp op, uint64_t nowNs, uint64_t* dataFaults);
  // Fails the comm with the error or close rule in its slot `ruleSlot`.
  Status inject(Comm& comm, size_t ruleSlot);
  void closeInner(Comm& comm);
  Status testWrapped(WrappedRequest& request, int* done, int* sizes);

  std::unique_ptr<Transport> inner_;
  const std::vector<FaultRule> rules_;
  std::vector<std::string> descriptions_;   // describe(rule), per rule
  std::vector<std::string> errorMessages_;  // "injected fault: <rule>", per rule
  const Clock clock_;
  const uint64_t createdNs_;
  const bool direct_;  // no rules: forward everything unwrapped
  std::string name_;

  std::mutex mutex_;  // guards connectRules_ and parked_ (connect/accept only)
  std::vector<RuleState> connectRules_;
  std::vector<Parked> parked_;  // stalled connects, keyed by dev and handle bytes
};

}  // namespace resilient::transport::fault
