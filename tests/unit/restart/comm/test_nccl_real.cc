// The installed NCCL (libnccl.so.2), on a machine that may have no GPU: the
// loader finds it and its version; creating a communicator without a usable
// GPU fails with a clear RestartError, never a crash or a hang. Skipped
// (exit 77) where libnccl.so.2 cannot be loaded. With a GPU, the creation
// succeeds and the communicator is revoked and destroyed.
#include <dlfcn.h>

#include <chrono>

#include "resilient/restart/nccl_communicator.hpp"
#include "restart/comm/nccl_library.h"
#include "tests/support/skip.h"
#include "tests/unit/restart/comm/comm_harness.h"

using namespace resilient;
using namespace resilient::restart;
using std::chrono::milliseconds;

namespace {

const resilient::test::Precondition kNeedsNccl{[] {
  void* h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    return std::string("libnccl.so.2 cannot be loaded: ") + dlerror();
  }
  dlclose(h);
  return std::string();
}};

}  // namespace

TEST_CASE("the process's libnccl.so.2 is found, with its version and calls", "[nccl-real]") {
  auto lib = comm::NcclLibrary::load("libnccl.so.2");
  INFO(lib->path() << " NCCL " << lib->version().text());
  REQUIRE(lib->version().atLeast(2, 14, 0));
  REQUIRE_THAT(lib->path(), Catch::Contains("libnccl.so"));
  if (lib->version().atLeast(2, 28, 7)) {
    REQUIRE(lib->hasRevoke());
    REQUIRE(lib->hasShrink());
  }
  // Loaded by us: now RTLD_NOLOAD finds this very copy.
  void* again = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(again != nullptr);
  REQUIRE(dlsym(again, "ncclGetVersion") == reinterpret_cast<void*>(lib->getVersion));
  dlclose(again);
}

TEST_CASE("creation on this machine either works or fails with a clear RestartError",
          "[nccl-real]") {
  const commtest::Iteration it(std::make_shared<store::MemoryStore>(), 0, 1);
  commtest::RankContext c = it.context(0);
  NcclOptions o;
  o.destroyTimeout = milliseconds(20000);
  std::shared_ptr<NcclCommunicator> comm;
  try {
    comm = NcclCommunicator::create(c.setup("real", milliseconds(60000)), o);
  } catch (const RestartError& e) {
    // No GPU: NCCL refuses (ncclUnhandledCudaError from the CUDA runtime, or
    // a bootstrap error), named with NCCL's own text.
    INFO(e.what());
    REQUIRE_THAT(e.what(), Catch::Contains("nccl comm 'real'") &&
                               (Catch::Contains("ncclCommInitRankConfig failed") ||
                                Catch::Contains("ncclGetUniqueId failed")));
    return;
  }
  // A GPU: a working one-rank communicator, then revoke (or abort) and destroy.
  REQUIRE(comm->handle() != nullptr);
  REQUIRE_FALSE(comm->asyncError());
  comm->abort();
  comm.reset();
}
