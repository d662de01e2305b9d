#include "store/errors.h"

#include <utility>

namespace resilient::store {

const char* storeErrcName(StoreErrc code) noexcept {
  switch (code) {
    case StoreErrc::kTimeout: return "timeout";
    case StoreErrc::kConnectionLost: return "connection lost";
    case StoreErrc::kAuthRefused: return "auth refused";
    case StoreErrc::kProtocol: return "protocol error";
    case StoreErrc::kInvalidArgument: return "invalid argument";
    case StoreErrc::kBarrierTimeout: return "barrier timeout";
    case StoreErrc::kBarrierOverflow: return "barrier overflow";
    case StoreErrc::kBarrierStale: return "barrier stale";
    case StoreErrc::kBackend: return "backend error";
    case StoreErrc::kClosed: return "closed";
  }
  return "?";
}

StoreError::StoreError(StoreErrc code, const std::string& message)
    : std::runtime_error(message), code_(code) {}

TimeoutError::TimeoutError(const std::string& message, std::vector<std::string> missingKeys)
    : StoreError(StoreErrc::kTimeout, message), missingKeys_(std::move(missingKeys)) {}

TimeoutError::TimeoutError(StoreErrc code, const std::string& message)
    : StoreError(code, message) {}

namespace {

std::string barrierName(const BarrierReport& r) {
  return "barrier '" + r.name + "' generation " + std::to_string(r.generation);
}

std::string timeoutMessage(const BarrierReport& r, int64_t timeoutMs) {
  std::string msg = barrierName(r) + " timed out after " + std::to_string(timeoutMs) +
                    " ms: " + std::to_string(r.arrived) + " of " + std::to_string(r.worldSize) +
                    " ranks arrived; missing rank" + (r.missingRanks.size() == 1 ? " " : "s ") +
                    formatRanks(r.missingRanks);
  if (!r.surplusRanks.empty()) {
    msg += "; surplus ranks refused: " + formatRanks(r.surplusRanks);
  }
  return msg;
}

std::string overflowMessage(const BarrierReport& r) {
  return barrierName(r) + " overflow: it expects ranks 0-" + std::to_string(r.worldSize - 1) +
         ", surplus rank" + (r.surplusRanks.size() == 1 ? " " : "s ") +
         formatRanks(r.surplusRanks) + " arrived";
}

}  // namespace

BarrierTimeout::BarrierTimeout(BarrierReport report, int64_t timeoutMs)
    : TimeoutError(StoreErrc::kBarrierTimeout, timeoutMessage(report, timeoutMs)),
      report_(std::move(report)) {}

BarrierOverflow::BarrierOverflow(BarrierReport report)
    : StoreError(StoreErrc::kBarrierOverflow, overflowMessage(report)),
      report_(std::move(report)) {}

BarrierStale::BarrierStale(const std::string& name, uint64_t generation)
    : StoreError(StoreErrc::kBarrierStale, "barrier '" + name + "' generation " +
                                               std::to_string(generation) +
                                               " completed long ago and is forgotten") {}

std::string formatRanks(const std::vector<int>& ranks, size_t maxItems) {
  std::string out;
  size_t items = 0;
  size_t i = 0;
  while (i < ranks.size()) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) {
      ++j;
    }
    if (items == maxItems) {
      out += ", ... (" + std::to_string(ranks.size()) + " in all)";
      return out;
    }
    if (!out.empty()) {
      out += ", ";
    }
    out += std::to_string(ranks[i]);
    if (j > i) {
      out += "-" + std::to_string(ranks[j]);
    }
    ++items;
    i = j + 1;
  }
  return out.empty() ? "none" : out;
}

std::string formatKeys(const std::vector<std::string>& keys, size_t maxItems) {
  std::string out;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i == maxItems) {
      out += ", ... (" + std::to_string(keys.size()) + " in all)";
      break;
    }
    if (i > 0) {
      out += ", ";
    }
    out += "'" + keys[i] + "'";
  }
  return out.empty() ? "none" : out;
}

void throwStatus(const Status& status) {
  const bool network = status.kind() == ErrorKind::kRemote || status.kind() == ErrorKind::kTimeout;
  const std::string message = status.sysErrno() == 0
                                  ? status.message()
                                  : status.message() + ": " + errnoText(status.sysErrno());
  if (network) {
    throw ConnectionLost(message);
  }
  throw InvalidArgument(message);
}

void throwStoreError(StoreErrc code, const std::string& message) {
  switch (code) {
    case StoreErrc::kTimeout: throw TimeoutError(message);
    case StoreErrc::kConnectionLost: throw ConnectionLost(message);
    case StoreErrc::kAuthRefused: throw AuthRefused(message);
    case StoreErrc::kProtocol: throw ProtocolError(message);
    case StoreErrc::kInvalidArgument: throw InvalidArgument(message);
    case StoreErrc::kBackend: throw BackendError(message);
    case StoreErrc::kClosed: throw StoreClosed(message);
    case StoreErrc::kBarrierTimeout:
    case StoreErrc::kBarrierOverflow:
    case StoreErrc::kBarrierStale: break;
  }
  throw StoreError(code, message);
}

}  // namespace resilient::store
