// Loading another NCCL net plugin as the inner transport
// (NCCL_RESILIENT_INNER=<spec>).
//
// The library is resolved exactly as NCCL resolves NCCL_NET_PLUGIN (fact
// sheet §1.1): dlopen(spec, RTLD_NOW | RTLD_LOCAL); if that fails and spec
// has no '/' and is not of the form lib*.so, dlopen("libnccl-net-<spec>.so").
// The struct used is the first of ncclNetPlugin_v12, _v11 ... _v6 the
// library exports. Nothing of the plugin runs here: its init is called by
// the transport's initContext.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nccl/log.h"
#include "nccl/net_common.h"
#include "common/status.h"
#include "plugin/transport/external/external_transport.h"

namespace resilient::transport::external {

struct LoadOptions {
  // A plugin name ("aws-ofi" -> libnccl-net-aws-ofi.so), a library name or a path.
  std::string spec;
  // Refuse a library that is the caller itself (the resilient plugin wrapping
  // itself would recurse), also when reached through a symlink such as
  // libnccl-net.so.
  bool refuseSelf = true;
  // The addresses of the caller's own exported ncclNetPlugin_v* structs. The
  // library is the caller when it exports one of these addresses, or when its
  // real path is the real path of the file that holds them (or, with none
  // given, of the file that holds this loader).
  std::vector<const void*> selfSymbols;
  // Handed to the plugin's init; nullptr: a function that forwards the
  // plugin's messages to our log facade.
  ncclDebugLogger_t logger = nullptr;
  // Handed to the init of v10+ plugins; nullptr: a no-op.
  ncclProfilerCallback_t profilerCallback = nullptr;
  // The newest ABI version to use (as an older NCCL would); tests drive each
  // version of a plugin this way.
  int maxVersion = 12;
};

// The symbols looked up, in order ("ncclNetPlugin_v12" ... "ncclNetPlugin_v6").
const std::vector<std::string>& pluginSymbolNames();

// Errors (all invalidUsage, since each is a configuration problem): an
// empty spec; a library that cannot be loaded (with dlerror() of each
// attempt); a library without any ncclNetPlugin_v* symbol (naming the
// library and the symbols tried); a plugin struct with a required member
// NULL; the caller itself when refuseSelf is set.
Result<std::unique_ptr<ExternalTransport>> loadExternalPlugin(const LoadOptions& options);

}  // namespace resilient::transport::external
