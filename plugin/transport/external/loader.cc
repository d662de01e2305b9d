#include "plugin/transport/external/loader.h"

#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>

#include <algorithm>
#include <array>
#include <cstdarg>
#include <cstdio>
#include <string>
#include <utility>

#include "common/log.h"
#include "plugin/transport/external/external_collnet.h"
#include "plugin/transport/external/shim.h"

namespace resilient::transport::external {
namespace {

using Factory = Result<std::unique_ptr<ExternalTransport>> (*)(PluginBinding);

struct VersionEntry {
  int version;
  const char* symbol;
  Factory make;
};

// Newest first: the first symbol found wins, as in NCCL.
constexpr std::array<VersionEntry, 7> kVersions{{
    {12, "ncclNetPlugin_v12", &makeV12},
    {11, "ncclNetPlugin_v11", &makeV11},
    {10, "ncclNetPlugin_v10", &makeV10},
    {9, "ncclNetPlugin_v9", &makeV9},
    {8, "ncclNetPlugin_v8", &makeV8},
    {7, "ncclNetPlugin_v7", &makeV7},
    {6, "ncclNetPlugin_v6", &makeV6},
}};

// An object inside this library, to find our own file when the caller names
// no symbols of its own.
const char kSelfMarker = 0;

// The text of the last dl* failure on this thread (dlerror's state is per
// thread in glibc; it is read once, right after the failing call).
std::string takeDlError() {
  const char* text = dlerror();  // NOLINT(concurrency-mt-unsafe): per-thread state in glibc
  return text != nullptr ? std::string(text) : std::string("unknown dlopen error");
}

bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// NCCL's rule: the libnccl-net-<spec>.so form is tried only for a bare name
// that is not itself a lib*.so name.
bool triesPluginPrefix(const std::string& spec) {
  if (spec.find('/') != std::string::npos) {
    return false;
  }
  const bool libSo = spec.size() > 6 && spec.compare(0, 3, "lib") == 0 && endsWith(spec, ".so");
  return !libSo;
}

std::string realPath(const char* path) {
  if (path == nullptr || path[0] == '\0') {
    return {};
  }
  char* resolved = realpath(path, nullptr);
  if (resolved == nullptr) {
    return path;
  }
  std::string out(resolved);
  free(resolved);  // NOLINT(cppcoreguidelines-no-malloc): realpath's allocation
  return out;
}

// The file a dlopen handle maps, symlinks resolved.
std::string loadedPath(void* handle, const std::string& fallback) {
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, static_cast<void*>(&map)) == 0 && map != nullptr &&
      map->l_name != nullptr && map->l_name[0] != '\0') {
    return realPath(map->l_name);
  }
  (void)dlerror();  // NOLINT(concurrency-mt-unsafe): clears this thread's dl error
  return realPath(fallback.c_str());
}

// The file that holds `address`, symlinks resolved; empty when unknown.
std::string fileHolding(const void* address) {
  Dl_info info{};
  if (dladdr(address, &info) != 0 && info.dli_fname != nullptr) {
    return realPath(info.dli_fname);
  }
  return {};
}

// Why the library is the caller itself, or an empty string.
std::string selfReason(void* handle, const std::string& path, const LoadOptions& options) {
  for (const VersionEntry& v : kVersions) {
    const void* symbol = dlsym(handle, v.symbol);
    if (symbol != nullptr && std::find(options.selfSymbols.begin(), options.selfSymbols.end(),
                                       symbol) != options.selfSymbols.end()) {
      return std::string("it exports our own ") + v.symbol;
    }
  }
  std::vector<const void*> anchors = options.selfSymbols;
  if (anchors.empty()) {
    anchors.push_back(&kSelfMarker);
  }
  for (const void* anchor : anchors) {
    const std::string own = fileHolding(anchor);
    if (!own.empty() && own == path) {
      return "it is our own file";
    }
  }
  return {};
}

// The default logger handed to the plugin: its messages go to our facade.
void forwardPluginLog(ncclDebugLogLevel level, unsigned long flags, const char* fileOrFunc,
                      int line, const char* fmt, ...) {
  if (level <= NCCL_LOG_NONE || level > NCCL_LOG_TRACE || fmt == nullptr) {
    return;
  }
  const auto ourLevel = static_cast<log::Level>(level);
  if (!log::enabled(ourLevel, flags)) {
    return;
  }
  std::array<char, 1024> text{};
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text.data(), text.size(), fmt, ap);
  va_end(ap);
  log::write(ourLevel, flags, fileOrFunc != nullptr ? fileOrFunc : "?", line, "inner plugin: %s",
             text.data());
}

// The default profiler callback: no profiler, nothing recorded. Leaves
// *eHandle untouched, as NCCL does when its profiler is not interested.
ncclResult_t noProfiler(void** /*eHandle*/, int /*type*/, void* /*pHandle*/, int64_t /*pluginId*/,
                        void* /*extData*/) {
  return ncclSuccess;
}

// dlopen as NCCL does; on failure the error names every attempt.
Result<LibraryHandle> openLibrary(const std::string& spec, std::string* opened) {
  void* handle = dlopen(spec.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle != nullptr) {
    *opened = spec;
    return LibraryHandle(handle);
  }
  std::string why = "dlopen(" + spec + "): " + takeDlError();
  if (triesPluginPrefix(spec)) {
    const std::string alternative = "libnccl-net-" + spec + ".so";
    handle = dlopen(alternative.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) {
      *opened = alternative;
      return LibraryHandle(handle);
    }
    why += "; dlopen(" + alternative + "): " + takeDlError();
  }
  return invalidUsage("NCCL_RESILIENT_INNER=" + spec + ": cannot load the net plugin: " + why);
}

// The CollNet of the same library, newest ncclCollNetPlugin_vN first and
// independently of the net's version (src/plugin/net.cc, ncclNetPluginLoad).
// A library without one, or with an unusable one, has no CollNet: NCCL
// then disables CollNet without an error, so an INFO at most.
void adoptCollNetOf(ExternalTransport& transport, void* handle, int maxVersion,
                    ncclDebugLogger_t logger, const std::string& path) {
  Result<std::unique_ptr<CollNet>> collNet = loadExternalCollNet(handle, maxVersion, logger, path);
  if (!collNet.ok()) {
    RES_INFO(NCCL_NET | NCCL_INIT, "no CollNet: %s", collNet.status().toString().c_str());
    return;
  }
  transport.adoptCollNet(std::move(collNet).value());
}

}  // namespace

const std::vector<std::string>& pluginSymbolNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    out.reserve(kVersions.size());
    for (const VersionEntry& v : kVersions) {
      out.emplace_back(v.symbol);
    }
    return out;
  }();
  return names;
}

Result<std::unique_ptr<ExternalTransport>> loadExternalPlugin(const LoadOptions& options) {
  const std::string& spec = options.spec;
  if (spec.empty()) {
    return invalidUsage(
        "NCCL_RESILIENT_INNER is empty: name the net plugin to wrap (a name such as \"ib\" for "
        "libnccl-net-ib.so, a library name or a path)");
  }
  std::string opened;
  Result<LibraryHandle> library = openLibrary(spec, &opened);
  if (!library.ok()) {
    return library.status();
  }
  void* handle = library->get();
  const std::string path = loadedPath(handle, opened);

  if (options.refuseSelf) {
    const std::string reason = selfReason(handle, path, options);
    if (!reason.empty()) {
      RES_INFO(NCCL_NET | NCCL_INIT, "NCCL_RESILIENT_INNER=%s is the resilient plugin: %s",
               spec.c_str(), reason.c_str());
      return invalidUsage("NCCL_RESILIENT_INNER=" + spec +
                          " resolves to the resilient plugin itself (" + path +
                          "); choose another plugin");
    }
  }

  for (const VersionEntry& v : kVersions) {
    const void* symbol = v.version <= options.maxVersion ? dlsym(handle, v.symbol) : nullptr;
    if (symbol == nullptr) {
      continue;
    }
    PluginBinding binding;
    binding.library = std::move(library.value());
    binding.spec = spec;
    binding.path = path;
    binding.version = v.version;
    binding.symbol = symbol;
    binding.logger = options.logger != nullptr ? options.logger : &forwardPluginLog;
    binding.profilerCallback =
        options.profilerCallback != nullptr ? options.profilerCallback : &noProfiler;
    const ncclDebugLogger_t logger = binding.logger;
    Result<std::unique_ptr<ExternalTransport>> transport = v.make(std::move(binding));
    if (transport.ok()) {
      RES_INFO(NCCL_NET | NCCL_INIT, "inner transport: net plugin %s (%s) from %s",
               transport.value()->name(), v.symbol, path.c_str());
      adoptCollNetOf(**transport, handle, options.maxVersion, logger, path);
    }
    return transport;
  }
  (void)dlerror();  // NOLINT(concurrency-mt-unsafe): clears this thread's dl error

  std::string tried;
  for (const VersionEntry& v : kVersions) {
    tried += tried.empty() ? "" : ", ";
    tried += v.symbol;
  }
  return invalidUsage("NCCL_RESILIENT_INNER=" + spec + ": " + path +
                      " is not a net plugin NCCL could load: it exports none of " + tried);
}

}  // namespace resilient::transport::external
