#include "plugin/profiler/names.h"

#include <array>
#include <cstring>

namespace resilient::profiler {
namespace {

// Indexed by ncclFunc_t.
constexpr std::array<const char*, 11> kFuncs = {
    "Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce", "SendRecv",
    "Send",      "Recv",   "AlltoAll",  "Scatter",       "Gather",
};

struct Datatype {
  const char* name;
  size_t size;
};
// Indexed by ncclDataType_t (ncclInt8 = 0 ... ncclFloat8e5m2 = 11).
constexpr std::array<Datatype, 12> kDatatypes = {{
    {"ncclInt8", 1},
    {"ncclUint8", 1},
    {"ncclInt32", 4},
    {"ncclUint32", 4},
    {"ncclInt64", 8},
    {"ncclUint64", 8},
    {"ncclFloat16", 2},
    {"ncclFloat32", 4},
    {"ncclFloat64", 8},
    {"ncclBfloat16", 2},
    {"ncclFloat8e4m3", 1},
    {"ncclFloat8e5m2", 1},
}};

constexpr std::array<const char*, 7> kAlgos = {
    "TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"};
constexpr std::array<const char*, 3> kProtos = {"LL", "LL128", "SIMPLE"};

}  // namespace

uint8_t funcIndexOf(const char* name) noexcept {
  if (name == nullptr) {
    return kFuncOther;
  }
  for (size_t i = 0; i < kFuncs.size(); ++i) {
    if (std::strcmp(name, kFuncs[i]) == 0) {
      return static_cast<uint8_t>(i);
    }
  }
  return kFuncOther;
}

const char* funcName(uint32_t index) noexcept {
  return index < kFuncs.size() ? kFuncs[index] : "Unknown";
}

size_t datatypeSize(const char* name) noexcept {
  if (name == nullptr) {
    return 0;
  }
  for (const auto& d : kDatatypes) {
    if (std::strcmp(name, d.name) == 0) {
      return d.size;
    }
  }
  return 0;
}

const char* datatypeName(uint32_t code) noexcept {
  return code < kDatatypes.size() ? kDatatypes[code].name : "Unknown";
}

size_t datatypeSize(uint32_t code) noexcept {
  return code < kDatatypes.size() ? kDatatypes[code].size : 0;
}

const char* stepStateMeaning(uint32_t state) noexcept {
  switch (state) {
    case 8: return "the local GPU has not produced the data";
    case 9: return "isend posted, the network does not complete it";
    case 10: return "irecv posted, nothing arrives from the peer";
    case 11: return "received, the flush does not complete";
    case 12: return "received, the local GPU does not consume it";
    case 20: return "data ready, waiting for the peer's receive buffer";
    default: return "";
  }
}

const char* algoName(uint32_t code) noexcept {
  return code < kAlgos.size() ? kAlgos[code] : "Unknown";
}

const char* protoName(uint32_t code) noexcept {
  return code < kProtos.size() ? kProtos[code] : "Unknown";
}

}  // namespace resilient::profiler
