// The fault-injection spec language (NCCL_RESILIENT_FAULT): what to break,
// where and when. Reference with examples: docs/fault-injection.md.
//
//   spec  := rule { ';' rule }          empty rules (e.g. a trailing ';') are ignored
//   rule  := item { ',' item }
//   item  := key '=' value              spaces around keys and values are ignored
//
// Keys: kind (required), op, dir, after | at, peer, duration, delay, rate,
// prob, seed, error. The parser is strict: an unknown key or value, a key
// given twice, a bad number or a combination that cannot take effect is an
// invalid-usage error that quotes the rule and says what is accepted.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace resilient::transport::fault {

// What happens to a matching call or request.
enum class FaultKind {
  kStall,  // requests never complete, connect/accept never finish, while active
  kError,  // the call returns an error; the comm stays failed
  kClose,  // the inner comm is closed (the peer sees EOF); every later call fails
  kDelay,  // a request completes no earlier than its post time + delayMs
  kSlow,   // completions are paced to rateBytesPerS
  kNoSizes,  // test() completes caught requests without writing `sizes` (as some plugins do)
};

// Which calls a rule watches.
enum class FaultOp {
  kAny,  // every data request: isend and irecv (the default)
  kIsend,
  kIrecv,
  kTest,
  kConnect,
  kAccept,
};

// Which comms a rule watches: send comms (from connect), receive comms (from accept).
enum class FaultDir {
  kAny,
  kSend,
  kRecv,
};

// The error an error rule injects.
enum class InjectedError {
  kRemote,  // ErrorKind::kRemote (ncclRemoteError)
  kSystem,  // ErrorKind::kSystem (ncclSystemError)
};

inline constexpr uint64_t kMaxFaultMs = 1000000000000ull;  // 10^12 ms, ~31 years
inline constexpr size_t kMaxFaultRules = 64;

struct FaultRule {
  FaultKind kind = FaultKind::kStall;
  FaultOp op = FaultOp::kAny;
  FaultDir dir = FaultDir::kAny;
  uint64_t after = 0;          // matching calls that pass before the rule arms
  bool hasAt = false;          // armed by time (atMs) instead of by count (after)
  uint64_t atMs = 0;           // ms after the transport was created
  std::string peer;            // substring of the comm's peer endpoint; empty: any peer
  uint64_t durationMs = 0;     // how long the rule stays active once armed; 0: forever
  uint64_t delayMs = 0;        // kDelay: added latency per request
  uint64_t rateBytesPerS = 0;  // kSlow: completion throughput cap
  double prob = 1.0;           // fraction of matching calls affected once armed
  uint64_t seed = 0;           // seed of the prob draws
  InjectedError error = InjectedError::kRemote;  // kError only
};

const char* faultKindName(FaultKind kind) noexcept;
const char* faultOpName(FaultOp op) noexcept;
const char* faultDirName(FaultDir dir) noexcept;

// Parses a spec. An empty or blank spec gives no rules. At most kMaxFaultRules rules.
Result<std::vector<FaultRule>> parseFaultSpec(std::string_view spec);

// The rule in canonical spec syntax, kind first, only the keys that differ
// from their default: "kind=stall,op=isend,after=100". Parsing it gives the
// same rule back.
std::string describe(const FaultRule& rule);

}  // namespace resilient::transport::fault
