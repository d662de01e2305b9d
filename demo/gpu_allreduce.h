// The gradient all-reduce of the demo's NCCL mode (--nccl): the sums go to
// the GPU, ncclAllReduce(sum, float) runs on a stream of our own with the
// NcclCommunicator's handle, and come back. NCCL's calls are looked up with
// dlsym in the very library the communicator loaded (libraryPath()), so the
// demo links neither NCCL nor CUDA.
//
// The wait is one the restart loop can interrupt: it polls cudaStreamQuery
// (and ncclCommGetAsyncError while NCCL still enqueues, non-blocking
// communicators), the communicator's asyncError() and ctx.checkCancelled()
// with a short sleep in between. A restart (the loop cancels the call before
// it aborts the communicators) ends it with RankShouldRestart, an NCCL error
// with GpuAllReduceError, a communicator freed by ncclCommAbort with
// RestartError, and `timeout` without completion with GpuAllReduceError.
#pragma once

#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda_device.h"
#include "resilient/restart.hpp"

namespace resilient::demo {

// NCCL reported an error, or the all-reduce did not complete in time.
class GpuAllReduceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The few NCCL calls of the all-reduce (NCCL's signatures; enums as int).
struct NcclCalls {
  std::string library;  // the path they come from
  int (*allReduce)(const void*, void*, size_t, int, int, ncclComm*, CudaStream) = nullptr;
  int (*commGetAsyncError)(ncclComm*, int*) = nullptr;
  const char* (*getErrorString)(int) = nullptr;
  const char* (*getLastError)(ncclComm*) = nullptr;

  // From the already loaded `library` (dlopen with RTLD_NOLOAD); throws
  // GpuAllReduceError when it is not loaded or lacks a call.
  static NcclCalls of(const std::string& library);
  // "ncclRemoteError (6): ...; NCCL: <ncclGetLastError>"
  std::string describe(int result, ncclComm* comm) const;
};

class GpuAllReduce {
 public:
  // On device 0 (every rank of a host shares it): a stream, a device buffer
  // and a pinned host buffer of `count` floats. Throws CudaError.
  GpuAllReduce(const CudaRuntime* cuda, size_t count,
               std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // Frees the buffers unless work may still be running on them (an
  // interrupted all-reduce whose kernel was not seen to end): those are left
  // to the process's exit.
  ~GpuAllReduce();
  GpuAllReduce(const GpuAllReduce&) = delete;
  GpuAllReduce& operator=(const GpuAllReduce&) = delete;

  // Sums `values` (`count` floats) over the ranks of `comm`, in place, in
  // fixed point (int64, 32 fraction bits): exact, so the sums do not depend
  // on the order NCCL adds them in, which changes with the ranks' places in
  // its rings and trees after a restart. Throws if a value is out of range.
  // (The first GPU run, in float32: every loss after the restart differed in
  // its last bits from the fault-free run's.)
  void operator()(restart::CallContext& ctx, restart::NcclCommunicator& comm,
                  std::vector<float>& values);

 private:
  // Until everything enqueued on the stream has completed; `comm` (may be
  // null) is checked for errors between polls.
  void waitForStream(restart::CallContext& ctx, restart::NcclCommunicator* comm,
                     const std::string& what);
  // Until NCCL has enqueued the call that returned ncclInProgress.
  // Returns how many polls found the call still in progress.
  int waitEnqueued(restart::CallContext& ctx, restart::NcclCommunicator& comm, ncclComm* handle);
  // Between two polls: cancelled, aborted or out of time throw; else a short sleep.
  void pause(restart::CallContext& ctx, const restart::NcclCommunicator* comm,
             std::chrono::steady_clock::time_point deadline, const std::string& what) const;
  void release() noexcept;

  const CudaRuntime* cuda_;
  size_t count_;
  std::chrono::milliseconds timeout_;
  CudaStream stream_ = nullptr;
  int64_t* device_ = nullptr;
  int64_t* host_ = nullptr;  // pinned: the copies are asynchronous
  bool busy_ = false;      // work enqueued and not yet seen complete
  NcclCalls nccl_;
  // The communicator whose first all-reduce was traced (one line on stdout
  // per communicator: what NCCL returned, how long it took).
  ncclComm* traced_ = nullptr;
};

}  // namespace resilient::demo
