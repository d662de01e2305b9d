// The NCCL library of the process, loaded at run time (nccl_communicator.hpp).
//
// load("libnccl.so.2") first asks the dynamic loader for a copy already in
// the process (dlopen with RTLD_NOLOAD: the one the application or its
// framework linked), and only then loads it by name, so that the restart
// library and the application always drive the same NCCL. The handle is
// never closed: communicators may outlive any one user of it.
//
// Required symbols (NCCL >= 2.14, the first with non-blocking communicators):
// ncclGetVersion, ncclGetUniqueId, ncclCommInitRankConfig,
// ncclCommGetAsyncError, ncclCommAbort, ncclCommFinalize, ncclGroupEnd,
// ncclGetErrorString, ncclGetLastError (ncclCommDestroy is never called:
// nccl_communicator.cc, freeComm). Optional: ncclCommShrink (>= 2.27)
// and ncclCommRevoke (>= 2.28.7), used only when both the symbol and the
// version are there.
#pragma once

#include <memory>
#include <string>

#include "nccl/api.h"

namespace resilient::restart::comm {

struct NcclVersion {
  int code = 0;  // ncclGetVersion's value (22809)
  int major = 0;
  int minor = 0;
  int patch = 0;

  static NcclVersion fromCode(int code) noexcept;
  // "2.28.9"
  std::string text() const;
  bool atLeast(int maj, int min, int pat) const noexcept;
};

inline constexpr int kMinimumNcclMajor = 2;
inline constexpr int kMinimumNcclMinor = 14;

class NcclLibrary {
 public:
  // The library `name` (a soname or a path), loaded once per name and
  // process. Throws RestartError naming the library and what is wrong: it
  // cannot be loaded (dlerror), it is not NCCL (no ncclGetVersion), it is
  // older than 2.14, or a required symbol is missing.
  static std::shared_ptr<const NcclLibrary> load(const std::string& name);

  const NcclVersion& version() const noexcept { return version_; }
  // The file loaded (symlinks resolved).
  const std::string& path() const noexcept { return path_; }
  // True when the process had it loaded before we asked (RTLD_NOLOAD found it).
  bool wasLoaded() const noexcept { return wasLoaded_; }
  bool hasRevoke() const noexcept { return commRevoke != nullptr; }
  bool hasShrink() const noexcept { return commShrink != nullptr; }
  bool hasGrow() const noexcept { return commGrow != nullptr && commGetUniqueId != nullptr; }

  // "ncclRemoteError (6): remote process exited or there was a network error"
  std::string describe(ncclResult_t result) const;
  // ncclGetLastError(comm): NCCL's last WARN text (comm may be null).
  std::string lastError(ncclComm_t comm) const;

  ncclGetVersion_fn getVersion = nullptr;
  ncclGetUniqueId_fn getUniqueId = nullptr;
  ncclCommInitRankConfig_fn commInitRankConfig = nullptr;
  ncclCommGetAsyncError_fn commGetAsyncError = nullptr;
  ncclCommAbort_fn commAbort = nullptr;
  ncclCommFinalize_fn commFinalize = nullptr;
  ncclGroupEnd_fn groupEnd = nullptr;
  ncclGetErrorString_fn getErrorString = nullptr;
  ncclGetLastError_fn getLastError = nullptr;
  ncclCommRevoke_fn commRevoke = nullptr;  // null unless >= 2.28.7
  ncclCommShrink_fn commShrink = nullptr;  // null unless >= 2.27
  ncclCommGrow_fn commGrow = nullptr;                // null unless >= 2.29
  ncclCommGetUniqueId_fn commGetUniqueId = nullptr;  // null unless >= 2.29

 private:
  NcclLibrary() = default;

  NcclVersion version_;
  std::string path_;
  bool wasLoaded_ = false;
};

}  // namespace resilient::restart::comm
