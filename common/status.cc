#include "common/status.h"

#include <cstring>

namespace resilient {
namespace {

const std::string& emptyString() {
  static const std::string kEmpty;
  return kEmpty;
}

}  // namespace

const char* errorKindName(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::kRemote: return "remote error";
    case ErrorKind::kSystem: return "system error";
    case ErrorKind::kInternal: return "internal error";
    case ErrorKind::kInvalidUsage: return "invalid usage";
    case ErrorKind::kTimeout: return "timeout";
  }
  return "unknown error";
}

Status Status::error(ErrorKind kind, std::string message, int sysErrno, std::string peer) {
  Status s;
  s.rep_ = std::make_shared<const Rep>(Rep{kind, sysErrno, std::move(peer), std::move(message)});
  return s;
}

ErrorKind Status::kind() const noexcept {
  return rep_ ? rep_->kind : ErrorKind::kInternal;
}
int Status::sysErrno() const noexcept {
  return rep_ ? rep_->sysErrno : 0;
}
const std::string& Status::peer() const noexcept {
  return rep_ ? rep_->peer : emptyString();
}
const std::string& Status::message() const noexcept {
  return rep_ ? rep_->message : emptyString();
}

std::string Status::toString() const {
  if (ok()) {
    return "ok";
  }
  std::string out = errorKindName(rep_->kind);
  out += ": ";
  if (!rep_->peer.empty()) {
    out += "peer " + rep_->peer + ": ";
  }
  out += rep_->message;
  if (rep_->sysErrno != 0) {
    const char* name = strerrorname_np(rep_->sysErrno);
    out += ": ";
    out += errnoText(rep_->sysErrno);
    out += " (errno " + std::to_string(rep_->sysErrno);
    if (name != nullptr) {
      out += " ";
      out += name;
    }
    out += ")";
  }
  return out;
}

ncclResult_t toNcclResult(const Status& status) noexcept {
  if (status.ok()) {
    return ncclSuccess;
  }
  switch (status.kind()) {
    case ErrorKind::kRemote:
    case ErrorKind::kTimeout:  // a peer that missed its deadline is a remote failure
      return ncclRemoteError;
    case ErrorKind::kSystem: return ncclSystemError;
    case ErrorKind::kInvalidUsage: return ncclInvalidUsage;
    case ErrorKind::kInternal: return ncclInternalError;
  }
  return ncclInternalError;
}

std::string errnoText(int err) {
  char buf[128];
  // GNU strerror_r: thread-safe, returns a pointer to the text.
  return strerror_r(err, buf, sizeof buf);
}

const char* ncclResultName(ncclResult_t result) noexcept {
  switch (result) {
    case ncclSuccess: return "ncclSuccess";
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
    case ncclNumResults: break;
  }
  return "unknown result";
}

}  // namespace resilient
