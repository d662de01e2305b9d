// resilient-netprops: a net plugin library as NCCL sees it. For each
// ncclNetPlugin_vN the library exports (or those --abi names) it calls init
// as NCCL does, then lists which of the table's optional members are set
// (NCCL reads them after init, docs/net-plugin.md "Capabilities passed
// through") and every field of every device's properties, as JSON. Run it
// on a plugin and on libnccl-net-resilient.so wrapping that plugin
// (NCCL_RESILIENT_INNER): the two listings must be equal but for the table's
// name (tests/thirdparty: ofi-properties).
#include <dlfcn.h>

#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "nccl/net_v10.h"
#include "nccl/net_v11.h"
#include "nccl/net_v12.h"
#include "nccl/net_v6.h"
#include "nccl/net_v7.h"
#include "nccl/net_v8.h"
#include "nccl/net_v9.h"

namespace {

using nlohmann::json;

void quietLogger(ncclDebugLogLevel, unsigned long, const char*, int, const char*, ...) {}

ncclResult_t noProfiler(void** handle, int, void*, int64_t, void*) {
  *handle = nullptr;
  return ncclSuccess;
}

// init as NCCL calls each version (src/plugin/net/net_vN.cc, ncclNet_init;
// v11 and v12 directly, with a communicator's id and config).
template <class Net>
ncclResult_t initAsNccl(const Net* net) {
  if constexpr (requires { net->finalize; }) {  // v11+
    static ncclNetCommConfig_v11_t config{NCCL_NET_TRAFFIC_CLASS_UNDEF};
    void* ctx = nullptr;
    return net->init(&ctx, 0x5eed, &config, quietLogger, noProfiler);
  } else if constexpr (requires { net->init(quietLogger, noProfiler); }) {  // v10
    return net->init(quietLogger, noProfiler);
  } else {
    return net->init(quietLogger);
  }
}

const char* text(const char* s) {
  return s != nullptr ? s : "(null)";
}

// Every field the version's properties have.
template <class Props>
json listProperties(const Props& p) {
  json j{{"name", text(p.name)},   {"pciPath", text(p.pciPath)}, {"guid", p.guid},
         {"ptrSupport", p.ptrSupport}, {"speed", p.speed},     {"port", p.port},
         {"latency", p.latency},   {"maxComms", p.maxComms},   {"maxRecvs", p.maxRecvs}};
  if constexpr (requires { p.netDeviceType; }) {
    j["netDeviceType"] = static_cast<int>(p.netDeviceType);
    j["netDeviceVersion"] = p.netDeviceVersion;
  }
  if constexpr (requires { p.regIsGlobal; }) {
    j["regIsGlobal"] = p.regIsGlobal;
  }
  if constexpr (requires { p.vProps; }) {
    j["forceFlush"] = p.forceFlush;
    json devs = json::array();
    for (int i = 0; i < p.vProps.ndevs && i < static_cast<int>(sizeof p.vProps.devs / sizeof(int));
         ++i) {
      devs.push_back(p.vProps.devs[i]);
    }
    j["vProps"] = {{"ndevs", p.vProps.ndevs}, {"devs", devs}};
    j["maxP2pBytes"] = p.maxP2pBytes;
    j["maxCollBytes"] = p.maxCollBytes;
  }
  if constexpr (requires { p.maxMultiRequestSize; }) {
    j["maxMultiRequestSize"] = p.maxMultiRequestSize;
  }
  if constexpr (requires { p.railId; }) {
    j["railId"] = p.railId;
    j["planeId"] = p.planeId;
  }
  return j;
}

// The optional members that are set, after init.
template <class Net>
json listOptional(const Net* net) {
  json j{{"regMrDmaBuf", net->regMrDmaBuf != nullptr}};
  if constexpr (requires { net->getDeviceMr; }) {
    j["getDeviceMr"] = net->getDeviceMr != nullptr;
    j["irecvConsumed"] = net->irecvConsumed != nullptr;
  }
  if constexpr (requires { net->makeVDevice; }) {
    j["makeVDevice"] = net->makeVDevice != nullptr;
  }
  if constexpr (requires { net->setNetAttr; }) {
    j["setNetAttr"] = net->setNetAttr != nullptr;
  }
  return j;
}

template <class Net, class Props>
json listVersion(const Net* net) {
  json j{{"table", text(net->name)}};
  const ncclResult_t init = initAsNccl(net);
  j["init"] = static_cast<int>(init);
  if (init != ncclSuccess) {
    return j;
  }
  int ndev = 0;
  const ncclResult_t devices = net->devices(&ndev);
  j["devices"] = devices == ncclSuccess ? ndev : -1;
  j["optional"] = listOptional(net);
  json props = json::array();
  for (int dev = 0; dev < ndev; ++dev) {
    Props p{};
    const ncclResult_t r = net->getProperties(dev, &p);
    props.push_back(r == ncclSuccess ? listProperties(p) : json{{"error", static_cast<int>(r)}});
  }
  j["properties"] = props;
  return j;
}

json listSymbol(void* lib, int version) {
  const std::string symbol = "ncclNetPlugin_v" + std::to_string(version);
  void* table = dlsym(lib, symbol.c_str());
  if (table == nullptr) {
    return nullptr;
  }
  switch (version) {
    case 6: return listVersion<ncclNet_v6_t, ncclNetProperties_v6_t>(static_cast<ncclNet_v6_t*>(table));
    case 7: return listVersion<ncclNet_v7_t, ncclNetProperties_v7_t>(static_cast<ncclNet_v7_t*>(table));
    case 8: return listVersion<ncclNet_v8_t, ncclNetProperties_v8_t>(static_cast<ncclNet_v8_t*>(table));
    case 9: return listVersion<ncclNet_v9_t, ncclNetProperties_v9_t>(static_cast<ncclNet_v9_t*>(table));
    case 10:
      return listVersion<ncclNet_v10_t, ncclNetProperties_v10_t>(static_cast<ncclNet_v10_t*>(table));
    case 11:
      return listVersion<ncclNet_v11_t, ncclNetProperties_v11_t>(static_cast<ncclNet_v11_t*>(table));
    case 12:
      return listVersion<ncclNet_v12_t, ncclNetProperties_v12_t>(static_cast<ncclNet_v12_t*>(table));
    default: return nullptr;
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string library;
  std::vector<int> versions;
  CLI::App app{
      "resilient-netprops: a net plugin library as NCCL sees it, per exported ABI version: the "
      "optional members set after init and every field of every device's properties (JSON)"};
  app.add_option("library", library, "the net plugin .so (a path, as NCCL_NET_PLUGIN resolves)")
      ->required();
  app.add_option("--abi", versions, "the ncclNetPlugin_vN versions to list (default: 12 to 6)")
      ->check(CLI::Range(6, 12));
  CLI11_PARSE(app, argc, argv);
  if (versions.empty()) {
    versions = {12, 11, 10, 9, 8, 7, 6};
  }
  void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);  // as NCCL opens it
  if (lib == nullptr) {
    std::fprintf(stderr, "resilient-netprops: cannot load %s: %s\n", library.c_str(), dlerror());
    return 2;
  }
  json out = json::object();
  for (int v : versions) {
    json listed = listSymbol(lib, v);
    if (!listed.is_null()) {
      out["ncclNetPlugin_v" + std::to_string(v)] = std::move(listed);
    }
  }
  std::printf("%s\n", out.dump(2).c_str());
  return out.empty() ? 1 : 0;
}
