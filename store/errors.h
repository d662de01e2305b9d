// The errors of the coordination store. restart/ is a C++ control-plane
// library and reports failures with exceptions (docs/store.md, "Errors"):
// every store call either returns its result or throws a StoreError whose
// code() says what went wrong. The C API of the restart library converts them
// at its boundary; nothing here crosses a C ABI.
//
//   StoreError                 any store failure; code() tells which
//   ├─ TimeoutError            the call's deadline passed (missingKeys() for wait)
//   │   └─ BarrierTimeout      a barrier was not complete in time (missing ranks)
//   ├─ ConnectionLost          the store (server, every etcd member) is unreachable
//   ├─ AuthRefused             the store refused our job token
//   ├─ ProtocolError           the peer broke the wire protocol, or a version mismatch
//   ├─ InvalidArgument         the request itself is wrong (too large, not a counter, ...)
//   └─ BarrierOverflow         more ranks arrived than the barrier expects
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/status.h"

namespace resilient::store {

enum class StoreErrc {
  kTimeout,          // deadline passed
  kConnectionLost,   // cannot reach the store, or the connection broke mid-call
  kAuthRefused,      // wrong job token
  kProtocol,         // malformed or unexpected bytes from the peer; version mismatch
  kInvalidArgument,  // bad request: limits, non-integer counter, barrier size mismatch
  kBarrierTimeout,   // barrier incomplete at the deadline
  kBarrierOverflow,  // a rank outside the barrier's world arrived
  kBarrierStale,     // the barrier generation is complete and forgotten
  kBackend,          // the backend reported an error of its own (etcd)
  kClosed,           // the store object was closed
};

const char* storeErrcName(StoreErrc code) noexcept;

class StoreError : public std::runtime_error {
 public:
  StoreError(StoreErrc code, const std::string& message);
  StoreErrc code() const noexcept { return code_; }

 private:
  StoreErrc code_;
};

class TimeoutError : public StoreError {
 public:
  explicit TimeoutError(const std::string& message, std::vector<std::string> missingKeys = {});
  // wait(): the keys still absent at the deadline.
  const std::vector<std::string>& missingKeys() const noexcept { return missingKeys_; }

 protected:
  TimeoutError(StoreErrc code, const std::string& message);

 private:
  std::vector<std::string> missingKeys_;
};

class ConnectionLost : public StoreError {
 public:
  explicit ConnectionLost(const std::string& message)
      : StoreError(StoreErrc::kConnectionLost, message) {}
};

class AuthRefused : public StoreError {
 public:
  explicit AuthRefused(const std::string& message) : StoreError(StoreErrc::kAuthRefused, message) {}
};

class ProtocolError : public StoreError {
 public:
  explicit ProtocolError(const std::string& message) : StoreError(StoreErrc::kProtocol, message) {}
};

class InvalidArgument : public StoreError {
 public:
  explicit InvalidArgument(const std::string& message)
      : StoreError(StoreErrc::kInvalidArgument, message) {}
};

class BackendError : public StoreError {
 public:
  explicit BackendError(const std::string& message) : StoreError(StoreErrc::kBackend, message) {}
};

// What a barrier looked like when it failed.
struct BarrierReport {
  std::string name;
  uint64_t generation = 0;
  int worldSize = 0;
  uint32_t arrived = 0;
  std::vector<int> missingRanks;  // ascending
  std::vector<int> surplusRanks;  // ascending: ranks outside [0, worldSize) that tried
};

class BarrierTimeout : public TimeoutError {
 public:
  BarrierTimeout(BarrierReport report, int64_t timeoutMs);
  const BarrierReport& report() const noexcept { return report_; }
  const std::vector<int>& missingRanks() const noexcept { return report_.missingRanks; }

 private:
  BarrierReport report_;
};

class BarrierOverflow : public StoreError {
 public:
  explicit BarrierOverflow(BarrierReport report);
  const BarrierReport& report() const noexcept { return report_; }
  const std::vector<int>& surplusRanks() const noexcept { return report_.surplusRanks; }

 private:
  BarrierReport report_;
};

class BarrierStale : public StoreError {
 public:
  BarrierStale(const std::string& name, uint64_t generation);
};

class StoreClosed : public StoreError {
 public:
  explicit StoreClosed(const std::string& message) : StoreError(StoreErrc::kClosed, message) {}
};

// "2, 5-9, 12" (ascending input); at most `maxItems` items, then ", ... (N in all)".
std::string formatRanks(const std::vector<int>& ranks, size_t maxItems = 32);
// "'a', 'b'" with the same cap.
std::string formatKeys(const std::vector<std::string>& keys, size_t maxItems = 16);

// Throws the StoreError subclass that matches `code` (used by backends that
// carry an error code over the wire).
[[noreturn]] void throwStoreError(StoreErrc code, const std::string& message);

// The StoreError of a common-layer failure (sockets, addresses): the peer or
// the network (remote, timeout) is ConnectionLost, anything else InvalidArgument.
[[noreturn]] void throwStatus(const Status& status);
// The value of a common-layer Result, or throwStatus.
template <class T>
T valueOrThrow(Result<T> result) {
  if (!result.ok()) {
    throwStatus(result.status());
  }
  return std::move(result).value();
}

}  // namespace resilient::store
