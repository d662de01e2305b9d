#include "restart/comm/nccl_library.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#include <map>
#include <mutex>

#include "common/status.h"
#include "resilient/restart/errors.hpp"

namespace resilient::restart::comm {

NcclVersion NcclVersion::fromCode(int code) noexcept {
  NcclVersion v;
  v.code = code;
  // Up to 2.8 the code is X*1000 + Y*100 + Z, from 2.9 on X*10000 + Y*100 + Z.
  const int scale = code >= 10000 ? 10000 : 1000;
  v.major = code / scale;
  v.minor = (code % scale) / 100;
  v.patch = code % 100;
  return v;
}

std::string NcclVersion::text() const {
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

bool NcclVersion::atLeast(int maj, int min, int pat) const noexcept {
  if (major != maj) {
    return major > maj;
  }
  if (minor != min) {
    return minor > min;
  }
  return patch >= pat;
}

namespace {

std::string dlerrorText() {
  const char* e = dlerror();
  return e != nullptr ? e : "unknown dlopen error";
}

std::string realPathOf(const void* symbol, const std::string& fallback) {
  Dl_info info{};
  if (dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) {
    return fallback;
  }
  char resolved[PATH_MAX];
  if (realpath(info.dli_fname, resolved) == nullptr) {
    return info.dli_fname;
  }
  return resolved;
}

template <class Fn>
Fn symbol(void* handle, const char* name) {
  return reinterpret_cast<Fn>(dlsym(handle, name));
}

}  // namespace

std::shared_ptr<const NcclLibrary> NcclLibrary::load(const std::string& name) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const NcclLibrary>> loaded;
  const std::lock_guard<std::mutex> lock(mutex);
  if (auto it = loaded.find(name); it != loaded.end()) {
    return it->second;
  }
  if (name.empty()) {
    throw RestartError("NCCL: no library name given");
  }
  // Keep the net plugin loaded between iterations: NCCL dlcloses it when it
  // frees the last communicator that uses it (v2.28.9-1 src/plugin/net.cc:
  // ncclNetPluginFinalize, at a reference count of 0), which takes our
  // blackbox and liveness state with it whenever a restart aborts every
  // communicator before making the next. NCCL_NET_PLUGIN_REF_COUNT is the
  // count each plugin starts from (NCCL_PARAM NetPluginRefCount, default 0,
  // read once, at the first communicator: initPluginLibsOnceFunc): 1 pins it.
  // A value the user set is kept.
  (void)setenv("NCCL_NET_PLUGIN_REF_COUNT", "1", 0);

  std::shared_ptr<NcclLibrary> lib(new NcclLibrary());
  void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_NOLOAD);
  lib->wasLoaded_ = handle != nullptr;
  if (handle == nullptr) {
    handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  }
  if (handle == nullptr) {
    throw RestartError("NCCL: cannot load '" + name + "': " + dlerrorText());
  }
  // From here on the handle stays open (see the header), also when we refuse it.
  lib->getVersion = symbol<ncclGetVersion_fn>(handle, "ncclGetVersion");
  if (lib->getVersion == nullptr) {
    throw RestartError("NCCL: '" + name + "' has no ncclGetVersion: not an NCCL library");
  }
  lib->path_ = realPathOf(reinterpret_cast<const void*>(lib->getVersion), name);
  int code = 0;
  if (lib->getVersion(&code) != ncclSuccess || code <= 0) {
    throw RestartError("NCCL: ncclGetVersion of " + lib->path_ + " failed");
  }
  lib->version_ = NcclVersion::fromCode(code);
  const std::string what = "NCCL " + lib->version_.text() + " (" + lib->path_ + ")";
  if (!lib->version_.atLeast(kMinimumNcclMajor, kMinimumNcclMinor, 0)) {
    throw RestartError(what + " is too old: the restart library needs NCCL >= " +
                       std::to_string(kMinimumNcclMajor) + "." +
                       std::to_string(kMinimumNcclMinor) +
                       " (non-blocking communicators, ncclCommFinalize)");
  }

  struct Required {
    const char* name;
    void** slot;
  };
  const Required required[] = {
      {"ncclGetUniqueId", reinterpret_cast<void**>(&lib->getUniqueId)},
      {"ncclCommInitRankConfig", reinterpret_cast<void**>(&lib->commInitRankConfig)},
      {"ncclCommGetAsyncError", reinterpret_cast<void**>(&lib->commGetAsyncError)},
      {"ncclCommAbort", reinterpret_cast<void**>(&lib->commAbort)},
      {"ncclCommFinalize", reinterpret_cast<void**>(&lib->commFinalize)},
      {"ncclGroupEnd", reinterpret_cast<void**>(&lib->groupEnd)},
      {"ncclGetErrorString", reinterpret_cast<void**>(&lib->getErrorString)},
      {"ncclGetLastError", reinterpret_cast<void**>(&lib->getLastError)},
  };
  std::string missing;
  for (const Required& r : required) {
    *r.slot = dlsym(handle, r.name);
    if (*r.slot == nullptr) {
      missing += (missing.empty() ? "" : ", ") + std::string(r.name);
    }
  }
  if (!missing.empty()) {
    throw RestartError(what + " lacks " + missing);
  }
  if (lib->version_.atLeast(2, 28, 7)) {
    lib->commRevoke = symbol<ncclCommRevoke_fn>(handle, "ncclCommRevoke");
  }
  if (lib->version_.atLeast(2, 27, 0)) {
    lib->commShrink = symbol<ncclCommShrink_fn>(handle, "ncclCommShrink");
  }
  if (lib->version_.atLeast(2, 29, 0)) {
    lib->commGrow = symbol<ncclCommGrow_fn>(handle, "ncclCommGrow");
    lib->commGetUniqueId = symbol<ncclCommGetUniqueId_fn>(handle, "ncclCommGetUniqueId");
  }
  loaded.emplace(name, lib);
  return lib;
}

std::string NcclLibrary::describe(ncclResult_t result) const {
  std::string text = std::string(ncclResultName(result)) + " (" +
                     std::to_string(static_cast<int>(result)) + ")";
  const char* s = getErrorString != nullptr ? getErrorString(result) : nullptr;
  if (s != nullptr && *s != '\0') {
    text += std::string(": ") + s;
  }
  return text;
}

std::string NcclLibrary::lastError(ncclComm_t comm) const {
  const char* s = getLastError != nullptr ? getLastError(comm) : nullptr;
  return s != nullptr ? s : "";
}

}  // namespace resilient::restart::comm
