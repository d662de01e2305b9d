// The stock finalize hook (the reference's ThreadedFinalize): the user's
// function on its own thread, bounded by a timeout.
#include <string>
#include <utility>

#include "common/dl/cuda_runtime.h"
#include "resilient/restart/errors.hpp"
#include "resilient/restart/hooks.hpp"
#include "restart/hooks/bounded_call.h"

namespace resilient::restart {

FinalizeFn threadedFinalize(std::chrono::milliseconds timeout, FinalizeFn fn) {
  if (timeout.count() <= 0) {
    throw ConfigError("threadedFinalize: the timeout must be positive, not " +
                      std::to_string(timeout.count()) + " ms");
  }
  if (!fn) {
    throw ConfigError("threadedFinalize: the finalize function is empty");
  }
  return [timeout, fn = std::move(fn)](const State& state) {
    // The CUDA device is per thread: the new thread starts on the caller's
    // (when the process uses the CUDA runtime), as the reference's does.
    // The runtime is never unloaded, so the pointer stays valid on the thread.
    const dl::CudaRuntime* rt = dl::loadedCudaRuntime();
    int device = -1;
    if (rt != nullptr && rt->getDevice(&device) != dl::kCudaSuccess) {
      device = -1;
    }
    // The thread may outlive this call (on a timeout): it gets its own copies.
    detail::runBounded(timeout, "finalize", "restart-final", [fn, state, rt, device] {
      if (rt != nullptr && device >= 0) {
        rt->setDevice(device);
      }
      fn(state);
    });
  };
}

}  // namespace resilient::restart
