// The external inner transport: another NCCL net plugin .so, driven through
// the newest ABI version it exports (ncclNetPlugin_v11 down to _v6).
//
// ExternalTransport is the version-neutral face; one small shim per ABI
// version (adapt_v6.cc ... adapt_v11.cc) derives from it and maps that
// version's calls onto the v11-shaped Transport semantics, the way NCCL's
// core adapts old plugins. Create one with loadExternalPlugin (loader.h).
//
// Comms, requests and memory handles are the inner plugin's own pointers,
// passed through unchanged; per-communicator contexts are ours (they keep
// the CommConfig and, for v11, the plugin's context).
//
// Caveats the resilient layer above must know:
// - connect(): NCCL's own socket and IB plugins keep their connection state
//   inside the handle buffer and write to it between polls; the handle is
//   passed on as given (writable and stable across the polls of one
//   connection, as transport.h requires of every caller).
// - handleBytes() is kHandleSize: no plugin says how many handle bytes it
//   uses. The resilient layer checks which trailing bytes stay zero after
//   listen() before it stores anything of its own there.
// - Errors are whatever the inner plugin returns; a comm that failed once is
//   not made sticky here (the resilient layer tracks its comms and requests).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "nccl/log.h"
#include "nccl/net_common.h"
#include "nccl/result.h"
#include "common/status.h"
#include "plugin/transport/transport.h"

namespace resilient::transport::external {

// The oldest and newest net plugin ABI versions we drive.
inline constexpr int kOldestVersion = 6;
inline constexpr int kNewestVersion = 11;

// Largest n of a grouped irecv we pass on (NCCL's MAXCHANNELS bound).
inline constexpr int kMaxRecvN = NCCL_PROXY_MAX_SUBS;

// Owns a dlopen handle; dlclose on destruction.
class LibraryHandle {
 public:
  LibraryHandle() noexcept = default;
  explicit LibraryHandle(void* handle) noexcept : handle_(handle) {}
  ~LibraryHandle();
  LibraryHandle(LibraryHandle&& other) noexcept : handle_(other.release()) {}
  LibraryHandle& operator=(LibraryHandle&& other) noexcept;
  LibraryHandle(const LibraryHandle&) = delete;
  LibraryHandle& operator=(const LibraryHandle&) = delete;

  void* get() const noexcept { return handle_; }
  void* release() noexcept {
    void* h = handle_;
    handle_ = nullptr;
    return h;
  }

 private:
  void* handle_ = nullptr;
};

// What the loader hands to a version shim.
struct PluginBinding {
  LibraryHandle library;
  std::string spec;                    // as configured (NCCL_RESILIENT_INNER)
  std::string path;                    // the library actually loaded (resolved path)
  int version = 0;                     // N of the ncclNetPlugin_vN found
  const void* symbol = nullptr;        // that ncclNetPlugin_vN struct, inside the library
  ncclDebugLogger_t logger = nullptr;  // never null
  ncclProfilerCallback_t profilerCallback = nullptr;  // never null
};

// The one translation of an inner plugin's ncclResult_t into a Status:
// ncclSystemError -> kSystem, ncclRemoteError -> kRemote, ncclInvalidUsage and
// ncclInvalidArgument -> kInvalidUsage, any other code -> kInternal. The
// message names the plugin, its ABI version and the call. ncclSuccess, and
// ncclInProgress (which NCCL's own checks also take for success), give ok.
Status pluginStatus(ncclResult_t result, const std::string& plugin, int version, const char* call);


class ExternalTransport : public Transport {
 public:
  ~ExternalTransport() override;
  ExternalTransport(const ExternalTransport&) = delete;
  ExternalTransport& operator=(const ExternalTransport&) = delete;

  // The inner plugin's name field ("IB", "AWS Libfabric", ...).
  const char* name() const noexcept override { return name_.c_str(); }
  // See the caveat above: every byte may be the plugin's.
  size_t handleBytes() const noexcept override { return kHandleSize; }

  // N of the ncclNetPlugin_vN symbol in use.
  int abiVersion() const noexcept { return binding_.version; }
  // The library file loaded (symlinks resolved).
  const std::string& libraryPath() const noexcept { return binding_.path; }
  // Contexts created by initContext and not finalized yet.
  int liveContexts() const noexcept;

 protected:
  explicit ExternalTransport(PluginBinding binding, const char* pluginName);

  // ok for ncclSuccess; otherwise pluginStatus(...) for `call`. Inline fast path.
  Status check(ncclResult_t result, const char* call) const {
    if (result == ncclSuccess) {
      return Status();
    }
    return failure(result, call);
  }
  // invalidUsage naming the plugin and the call.
  Status refuse(const char* call, const std::string& why) const;

  // A copy of `text` that lives as long as this transport (Properties
  // strings); nullptr stays nullptr.
  const char* keep(const char* text);

  ncclDebugLogger_t logger() const noexcept { return binding_.logger; }
  ncclProfilerCallback_t profilerCallback() const noexcept { return binding_.profilerCallback; }
  const std::string& pluginName() const noexcept { return name_; }

  // Bookkeeping of live contexts (initContext/finalizeContext of the shims).
  void contextCreated() noexcept;
  void contextFinalized() noexcept;

 private:
  Status failure(ncclResult_t result, const char* call) const;

  PluginBinding binding_;
  std::string name_;
  mutable std::mutex mutex_;
  std::set<std::string> strings_;  // node-based: pointers stay valid
  std::atomic<int> liveContexts_{0};
};

}  // namespace resilient::transport::external
