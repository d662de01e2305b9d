// Names and sizes NCCL's profiler descriptors carry: functions, datatypes,
// algorithms and protocols. From v2 on NCCL passes its own static strings
// ("AllReduce", "ncclFloat32", "RING", "SIMPLE"); v1 passes the numeric enum
// values, which these tables turn into the same strings (docs/reference/nccl-abi.md §1.4,
// §2.4; ncclDataType_t as in the public nccl.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "blackbox/value_names.h"

namespace resilient::profiler {

// ncclFunc_t values; kFuncOther for anything else (RESILIENT_BLACKBOX_FUNCS - 1).
inline constexpr uint8_t kFuncBroadcast = 0;
inline constexpr uint8_t kFuncAllReduce = 4;
inline constexpr uint8_t kFuncSend = 6;
inline constexpr uint8_t kFuncRecv = 7;
inline constexpr uint8_t kFuncOther = 11;
inline constexpr uint8_t kFuncCount = 12;

// "AllReduce" -> 4; NULL or unknown -> kFuncOther.
uint8_t funcIndexOf(const char* name) noexcept;
// 4 -> "AllReduce"; unknown -> "Unknown".
const char* funcName(uint32_t index) noexcept;

// Element size of an NCCL datatype string ("ncclFloat32" -> 4); 0 unknown.
size_t datatypeSize(const char* name) noexcept;
// v1 numeric ncclDataType_t -> NCCL's string, and its size (0 unknown).
const char* datatypeName(uint32_t code) noexcept;
size_t datatypeSize(uint32_t code) noexcept;

// A proxy-step state's name (blackbox/value_names.h), and what a state means
// for a step that stays in it: "RecvWait (irecv posted, nothing arrives from
// the peer)". "none" for 0, "state N" for values without a meaning here.
using blackbox::stepStateName;
const char* stepStateMeaning(uint32_t state) noexcept;

// v1 numeric algorithm and protocol codes -> NCCL's strings.
const char* algoName(uint32_t code) noexcept;
const char* protoName(uint32_t code) noexcept;

}  // namespace resilient::profiler
