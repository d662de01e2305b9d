// The registry of every NCCL_RESILIENT_* knob: name, type, default, accepted
// range and a one-line doc. This table is the only place a knob is declared;
// docs/configuration.md is generated from it (resilient-config --markdown) and
// a test fails when the two drift. To add a knob: add its id to Param and its
// row to kRegistry, in the same position.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace resilient::config {

enum class ParamType {
  kBool,    // 0/1, true/false, yes/no, on/off (any case)
  kInt,     // integer (decimal, 0x hex or 0 octal, as NCCL parses) within [min, max]
  kEnum,    // one of `choices` (any case); the value is its index
  kString,  // any text, or what `validate` accepts
};

struct ParamSpec {
  int id = 0;                  // index of the row, checked at compile time
  const char* name = nullptr;  // full variable name, NCCL_RESILIENT_...
  ParamType type = ParamType::kString;
  const char* defaultValue = "";                 // textual, parsed like user input
  int64_t min = 0;                               // kInt only
  int64_t max = 0;                               // kInt only
  const char* unit = "";                         // kInt: "ms", "bytes", ... (docs and warnings)
  const char* choices = "";                      // kEnum: names separated by '|'
  const char* inherits = nullptr;                // NCCL variable used when ours is unset
  bool (*validate)(std::string_view) = nullptr;  // kString: optional check
  const char* accepted = "";  // kString with validate: what it accepts, for humans
  const char* doc = "";       // one line
};

// Knob ids, in registry order.
enum class Param : int {
  kLogLevel,
  kLogSubsys,
  kWarnIntervalMs,
  kInner,
  kSocketIfname,
  kSocketFamily,
  kSocketNsocks,
  kSocketNthreads,
  kSocketInlineBytes,
  kSocketChunkBytes,
  kSocketBufferBytes,
  kConnectTimeoutMs,
  kTcpUserTimeoutMs,
  kJobToken,
  kLivenessTimeoutMs,
  kProgressTimeoutMs,
  kFault,
  kBlackboxDir,
  kProfiler,
  kCollTimeoutMs,
  kProfilerOps,
  kProfilerProxySteps,
  kFlightRecorderOps,
  kStoreTimeoutMs,
  kStoreConnectTimeoutMs,
  kStoreReconnectTimeoutMs,
  kStoreMemberTimeoutMs,
  kHealthCudaTimeoutMs,
  kHealthNicErrorThreshold,
  kStoreUrl,
  kRestartJob,
  kRestartEnabled,
  kRestartMonitorProcess,
  kRestartTerminateCulprits,
  kRestartMonitorThreadIntervalMs,
  kRestartMonitorProcessIntervalMs,
  kRestartHeartbeatIntervalMs,
  kRestartProgressWatchdogIntervalMs,
  kRestartSoftTimeoutMs,
  kRestartHardTimeoutMs,
  kRestartHeartbeatTimeoutMs,
  kRestartBarrierTimeoutMs,
  kRestartCompletionTimeoutMs,
  kRestartLastCallWaitMs,
  kRestartTerminationGraceMs,
  kRestartFinalizeTimeoutMs,
  kRestartHealthCheckTimeoutMs,
  kRestartCommunicatorTimeoutMs,
  kRestartAutoHealthChecks,
  kCount,
};

std::span<const ParamSpec> registry() noexcept;

}  // namespace resilient::config
