#include <catch2/catch.hpp>

// The plugin library as NCCL drives it, through dlopen: per-communicator
// init/finalize (v11), finalize(NULL), init failure, and many
// load/init/finalize/unload cycles that leave no thread, descriptor or memory
// behind (the ASan build checks memory).
#include <dirent.h>
#include <dlfcn.h>

#include <cstring>
#include <string>
#include <vector>

#include "nccl/net_v11.h"
#include "nccl/net_v8.h"

#ifndef RESILIENT_PLUGIN_PATH
#error "RESILIENT_PLUGIN_PATH must name libnccl-net-resilient.so"
#endif

namespace {

size_t countEntries(const char* dir) {
  size_t n = 0;
  DIR* d = opendir(dir);
  if (d == nullptr) {
    return 0;
  }
  while (readdir(d) != nullptr) {
    ++n;
  }
  closedir(d);
  return n;
}

size_t threads() {
  return countEntries("/proc/self/task");
}
size_t descriptors() {
  return countEntries("/proc/self/fd");
}

void quietLogger(ncclDebugLogLevel, unsigned long, const char*, int, const char*, ...) {}

struct Library {
  void* handle = dlopen(RESILIENT_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
  ~Library() {
    if (handle != nullptr) {
      dlclose(handle);
    }
  }
  template <class T>
  const T* symbol(const char* name) const {
    return static_cast<const T*>(dlsym(handle, name));
  }
};

// One communicator's worth of work: init, devices, a listen comm (starts the
// watchdog and its liveness listener), close, finalize.
void oneCommunicator(const ncclNet_v11_t* net, uint64_t commId) {
  void* ctx = nullptr;
  ncclNetCommConfig_v11_t config{-1};
  REQUIRE(net->init(&ctx, commId, &config, quietLogger, nullptr) == ncclSuccess);
  REQUIRE(ctx != nullptr);
  int ndev = 0;
  REQUIRE(net->devices(&ndev) == ncclSuccess);
  REQUIRE(ndev > 0);
  ncclNetProperties_v11_t props{};
  REQUIRE(net->getProperties(0, &props) == ncclSuccess);
  CHECK(props.maxRecvs >= 8);
  CHECK(props.netDeviceType == NCCL_NET_DEVICE_HOST);
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void* listenComm = nullptr;
  REQUIRE(net->listen(ctx, 0, handle, &listenComm) == ncclSuccess);
  REQUIRE(listenComm != nullptr);
  REQUIRE(net->closeListen(listenComm) == ncclSuccess);
  REQUIRE(net->finalize(ctx) == ncclSuccess);
}

}  // namespace

TEST_CASE("the v11 struct is what NCCL expects", "[plugin][lifetime]") {
  Library lib;
  REQUIRE(lib.handle != nullptr);
  const auto* net = lib.symbol<ncclNet_v11_t>("ncclNetPlugin_v11");
  REQUIRE(net != nullptr);
  CHECK(std::string(net->name) == "Resilient");
  CHECK(net->regMrDmaBuf == nullptr);
  CHECK(net->getDeviceMr == nullptr);
  CHECK(net->irecvConsumed == nullptr);
  CHECK(net->makeVDevice == nullptr);
  CHECK(net->setNetAttr == nullptr);
  CHECK(net->finalize != nullptr);
  CHECK(net->finalize(nullptr) == ncclSuccess);  // NCCL calls it after a failed init
}

TEST_CASE("several communicators share the library; the last finalize stops everything",
          "[plugin][lifetime]") {
  const size_t threads0 = threads();
  const size_t fds0 = descriptors();
  {
    Library lib;
    const auto* net = lib.symbol<ncclNet_v11_t>("ncclNetPlugin_v11");
    REQUIRE(net != nullptr);
    void* a = nullptr;
    void* b = nullptr;
    ncclNetCommConfig_v11_t config{-1};
    REQUIRE(net->init(&a, 1, &config, quietLogger, nullptr) == ncclSuccess);
    REQUIRE(net->init(&b, 2, &config, quietLogger, nullptr) == ncclSuccess);
    char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
    void* listenComm = nullptr;
    REQUIRE(net->listen(b, 0, handle, &listenComm) == ncclSuccess);
    CHECK(threads() > threads0);  // the watchdog runs while a communicator needs it
    REQUIRE(net->closeListen(listenComm) == ncclSuccess);
    REQUIRE(net->finalize(a) == ncclSuccess);
    REQUIRE(net->finalize(b) == ncclSuccess);
    CHECK(threads() == threads0);  // stopped before the last finalize returned
  }
  CHECK(descriptors() == fds0);
}

TEST_CASE("100 load/init/finalize/unload cycles leave nothing behind", "[plugin][lifetime]") {
  const size_t threads0 = threads();
  const size_t fds0 = descriptors();
  for (int cycle = 0; cycle < 100; ++cycle) {
    CAPTURE(cycle);
    Library lib;
    REQUIRE(lib.handle != nullptr);
    oneCommunicator(lib.symbol<ncclNet_v11_t>("ncclNetPlugin_v11"), 0x1000u + cycle);
  }
  CHECK(threads() == threads0);
  CHECK(descriptors() == fds0);
}

TEST_CASE("an older NCCL's single init is released when the library unloads",
          "[plugin][lifetime]") {
  const size_t threads0 = threads();
  {
    Library lib;
    const auto* net = lib.symbol<ncclNet_v8_t>("ncclNetPlugin_v8");
    REQUIRE(net != nullptr);
    REQUIRE(net->init(quietLogger) == ncclSuccess);
    REQUIRE(net->init(quietLogger) == ncclSuccess);  // repeated init is harmless
    char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
    void* listenComm = nullptr;
    REQUIRE(net->listen(0, handle, &listenComm) == ncclSuccess);
    REQUIRE(net->closeListen(listenComm) == ncclSuccess);
  }
  CHECK(threads() == threads0);
}
