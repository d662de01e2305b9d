// Status and Result<T>: how errors travel inside the plugins and the restart
// library. An error carries a kind, the errno that caused it (0 if none), the
// peer it concerns (empty if none) and a message. An ok Status is a null
// pointer: creating, copying and testing it never allocates.
#pragma once

#include <cerrno>
#include <memory>
#include <string>
#include <utility>
#include <variant>

#include "nccl/result.h"

namespace resilient {

enum class ErrorKind {
  kRemote,        // the peer process, its host or the path to it failed
  kSystem,        // a local OS or network call failed
  kInternal,      // a bug or broken invariant in our code or in the caller
  kInvalidUsage,  // bad configuration or misuse by the user
  kTimeout,       // something did not happen within its deadline
};

const char* errorKindName(ErrorKind kind) noexcept;

class Status {
 public:
  Status() noexcept = default;  // ok

  static Status error(ErrorKind kind, std::string message, int sysErrno = 0, std::string peer = {});

  bool ok() const noexcept { return rep_ == nullptr; }
  // Accessors of an error; on an ok Status they return kInternal/0/"".
  ErrorKind kind() const noexcept;
  int sysErrno() const noexcept;
  const std::string& peer() const noexcept;
  const std::string& message() const noexcept;

  // "remote error: peer 10.0.0.2:40000: connection reset (errno 104 ECONNRESET)", or "ok".
  std::string toString() const;

 private:
  struct Rep {
    ErrorKind kind = ErrorKind::kInternal;
    int sysErrno = 0;
    std::string peer;
    std::string message;
  };
  std::shared_ptr<const Rep> rep_;
};

inline Status remoteError(std::string message, std::string peer = {}, int sysErrno = 0) {
  return Status::error(ErrorKind::kRemote, std::move(message), sysErrno, std::move(peer));
}
// Call right after the failing system call: the default argument reads errno.
inline Status systemError(std::string message, int sysErrno = errno, std::string peer = {}) {
  return Status::error(ErrorKind::kSystem, std::move(message), sysErrno, std::move(peer));
}
inline Status internalError(std::string message) {
  return Status::error(ErrorKind::kInternal, std::move(message));
}
inline Status invalidUsage(std::string message) {
  return Status::error(ErrorKind::kInvalidUsage, std::move(message));
}
inline Status timeoutError(std::string message, std::string peer = {}) {
  return Status::error(ErrorKind::kTimeout, std::move(message), 0, std::move(peer));
}

// The one translation of our errors into NCCL's codes. A dead, stalled or
// unreachable peer is ncclRemoteError ("remote process exited or there was a
// network error"); a local OS failure is ncclSystemError.
ncclResult_t toNcclResult(const Status& status) noexcept;

// "ncclRemoteError" for ncclRemoteError, ...; "unknown result" otherwise.
const char* ncclResultName(ncclResult_t result) noexcept;

// The text of errno `err` ("Connection refused"); thread-safe.
std::string errnoText(int err);

// A value or the error that prevented it.
template <class T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status error) : v_(std::move(error)) {
    ensureError();
  }  // NOLINT(google-explicit-constructor)

  bool ok() const noexcept { return v_.index() == 0; }
  // The error, or an ok Status when a value is held.
  Status status() const { return ok() ? Status() : std::get<1>(v_); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  void ensureError() {
    if (std::get<1>(v_).ok()) {
      v_ = internalError("Result constructed from an ok Status without a value");
    }
  }
  std::variant<T, Status> v_;
};

}  // namespace resilient

// Return the error of a Status-returning expression from the enclosing function.
#define RESILIENT_TRY(expr)                        \
  do {                                             \
    ::resilient::Status resilient_try_s_ = (expr); \
    if (!resilient_try_s_.ok()) {                  \
      return resilient_try_s_;                     \
    }                                              \
  } while (0)
