#include "gpu_allreduce.h"

#include <dlfcn.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <thread>

namespace resilient::demo {

namespace {

// NCCL's values (nccl.h): ncclResult_t, ncclDataType_t, ncclRedOp_t.
constexpr int kNcclSuccess = 0;
constexpr int kNcclInProgress = 7;
constexpr int kNcclInt64 = 4;
constexpr int kNcclSum = 0;

// The fixed point of the sums: 32 fraction bits; values below 2^28 in
// magnitude, so that a sum over 64 ranks stays within int64.
constexpr int kFractionBits = 32;
constexpr double kMaxMagnitude = 268435456.0;  // 2^28

// Between two polls of the stream: short against a step (the demo's steps
// take 20 ms), long enough not to spin a core per rank.
constexpr std::chrono::microseconds kPollInterval{50};

template <typename T>
void resolve(void* handle, const char* symbol, T* out, std::string* missing) {
  *out = reinterpret_cast<T>(::dlsym(handle, symbol));
  if (*out == nullptr && missing->empty()) {
    *missing = symbol;
  }
}

}  // namespace

NcclCalls NcclCalls::of(const std::string& library) {
  // The communicator loaded it; RTLD_NOLOAD finds that copy and loads nothing.
  // The reference is never dropped (the communicator keeps it loaded anyway).
  void* handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    throw GpuAllReduceError("the communicator's NCCL " + library +
                            " is not loaded: " + (why != nullptr ? why : "unknown error"));
  }
  NcclCalls c;
  c.library = library;
  std::string missing;
  resolve(handle, "ncclAllReduce", &c.allReduce, &missing);
  resolve(handle, "ncclCommGetAsyncError", &c.commGetAsyncError, &missing);
  resolve(handle, "ncclGetErrorString", &c.getErrorString, &missing);
  resolve(handle, "ncclGetLastError", &c.getLastError, &missing);
  if (!missing.empty()) {
    throw GpuAllReduceError(library + " has no " + missing);
  }
  return c;
}

std::string NcclCalls::describe(int result, ncclComm* comm) const {
  const char* text = getErrorString(result);
  const char* last = getLastError(comm);
  return std::string(text != nullptr ? text : "unknown NCCL result") + " (" +
         std::to_string(result) + ")" +
         (last != nullptr && *last != '\0' ? std::string("; NCCL: ") + last : std::string());
}

GpuAllReduce::GpuAllReduce(const CudaRuntime* cuda, size_t count, std::chrono::milliseconds timeout)
    : cuda_(cuda), count_(count), timeout_(timeout) {
  const CudaRuntime& rt = *cuda_;
  try {
    checkCuda(rt, rt.setDevice(0), "cudaSetDevice(0)");
    checkCuda(rt, rt.streamCreateWithFlags(&stream_, kCudaStreamNonBlocking),
              "cudaStreamCreateWithFlags");
    void* p = nullptr;
    checkCuda(rt, rt.mallocDevice(&p, count_ * sizeof(int64_t)), "cudaMalloc");
    device_ = static_cast<int64_t*>(p);
    p = nullptr;
    checkCuda(rt, rt.mallocHost(&p, count_ * sizeof(int64_t)), "cudaMallocHost");
    host_ = static_cast<int64_t*>(p);
  } catch (...) {
    release();
    throw;
  }
}

GpuAllReduce::~GpuAllReduce() {
  if (!busy_) {
    release();
  }
}

void GpuAllReduce::release() noexcept {
  const CudaRuntime& rt = *cuda_;
  if (host_ != nullptr) {
    (void)rt.freeHost(host_);
    host_ = nullptr;
  }
  if (device_ != nullptr) {
    (void)rt.freeDevice(device_);
    device_ = nullptr;
  }
  if (stream_ != nullptr) {
    (void)rt.streamDestroy(stream_);
    stream_ = nullptr;
  }
}

void GpuAllReduce::operator()(restart::CallContext& ctx, restart::NcclCommunicator& comm,
                              std::vector<float>& values) {
  if (values.size() != count_) {
    throw std::invalid_argument("GpuAllReduce: " + std::to_string(values.size()) +
                                " values, made for " + std::to_string(count_));
  }
  if (busy_) {
    // The all-reduce of an earlier iteration was interrupted; its
    // communicator's abort ends the kernel. The buffers are ours again after.
    waitForStream(ctx, nullptr, "the interrupted all-reduce");
  }
  ncclComm* handle = comm.handle();
  if (handle == nullptr) {
    throw restart::RestartError(comm.describe() + ": aborted, no NCCL communicator");
  }
  if (nccl_.library != comm.libraryPath()) {
    nccl_ = NcclCalls::of(comm.libraryPath());
  }
  const CudaRuntime& rt = *cuda_;
  const size_t bytes = count_ * sizeof(int64_t);
  for (size_t i = 0; i < count_; ++i) {
    const double v = values[i];
    if (!(std::fabs(v) < kMaxMagnitude)) {
      throw GpuAllReduceError("GpuAllReduce: value " + std::to_string(v) + " at " +
                              std::to_string(i) + " is outside the fixed point's range");
    }
    host_[i] = std::llround(std::ldexp(v, kFractionBits));
  }
  busy_ = true;
  checkCuda(rt, rt.memcpyAsync(device_, host_, bytes, kCudaMemcpyHostToDevice, stream_),
            "cudaMemcpyAsync (host to device)");
  const auto started = std::chrono::steady_clock::now();
  const int r = nccl_.allReduce(device_, device_, count_, kNcclInt64, kNcclSum, handle, stream_);
  int polls = 0;
  if (r == kNcclInProgress) {
    polls = waitEnqueued(ctx, comm, handle);
  } else if (r != kNcclSuccess) {
    throw GpuAllReduceError("ncclAllReduce: " + nccl_.describe(r, handle));
  }
  checkCuda(rt, rt.memcpyAsync(host_, device_, bytes, kCudaMemcpyDeviceToHost, stream_),
            "cudaMemcpyAsync (device to host)");
  waitForStream(ctx, &comm, "ncclAllReduce");
  if (handle != traced_) {
    // The first all-reduce of each communicator, for the GPU kit's logs.
    traced_ = handle;
    const double ms = std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - started)
                          .count();
    std::printf("nccl first all-reduce on %p: ncclAllReduce returned %d, %d polls in progress, "
                "stream done after %.1f ms\n",
                static_cast<void*>(handle), r, polls, ms);
    std::fflush(stdout);
  }
  // The stream is done, but a restart that began meanwhile may have revoked
  // the communicator in mid-collective (its kernels then end early): such
  // sums are not to be used. The loop cancels before it aborts.
  ctx.checkCancelled();
  for (size_t i = 0; i < count_; ++i) {
    values[i] = static_cast<float>(std::ldexp(static_cast<double>(host_[i]), -kFractionBits));
  }
}

void GpuAllReduce::waitForStream(restart::CallContext& ctx, restart::NcclCommunicator* comm,
                                 const std::string& what) {
  const CudaRuntime& rt = *cuda_;
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  for (;;) {
    const CudaStatus s = rt.streamQuery(stream_);
    if (s == kCudaSuccess) {
      busy_ = false;
      return;
    }
    if (s != kCudaErrorNotReady) {
      throw CudaError("cudaStreamQuery (" + what + "): " + rt.describe(s));
    }
    if (comm != nullptr) {
      if (std::optional<std::string> error = comm->asyncError()) {
        throw GpuAllReduceError(what + ": " + *error);
      }
    }
    pause(ctx, comm, deadline, what);
  }
}

int GpuAllReduce::waitEnqueued(restart::CallContext& ctx, restart::NcclCommunicator& comm,
                               ncclComm* handle) {
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  for (int polls = 0;; ++polls) {
    int state = kNcclSuccess;
    const int r = nccl_.commGetAsyncError(handle, &state);
    if (r != kNcclSuccess) {
      throw GpuAllReduceError("ncclCommGetAsyncError: " + nccl_.describe(r, handle));
    }
    if (state == kNcclSuccess) {
      return polls;
    }
    if (state != kNcclInProgress) {
      throw GpuAllReduceError("ncclAllReduce: " + nccl_.describe(state, handle));
    }
    // Checked before the next poll: ncclCommAbort (NCCL < 2.28.7, or no
    // revoke) frees `handle`, and the loop cancels the call before it aborts.
    pause(ctx, &comm, deadline, "ncclAllReduce (enqueue)");
  }
}

void GpuAllReduce::pause(restart::CallContext& ctx, const restart::NcclCommunicator* comm,
                         std::chrono::steady_clock::time_point deadline,
                         const std::string& what) const {
  ctx.checkCancelled();
  if (comm != nullptr && comm->handle() == nullptr) {
    throw restart::RestartError(what + ": " + comm->describe() + " was aborted");
  }
  if (std::chrono::steady_clock::now() > deadline) {
    throw GpuAllReduceError(what + " did not complete within " + std::to_string(timeout_.count()) +
                            " ms");
  }
  std::this_thread::sleep_for(kPollInterval);
}

}  // namespace resilient::demo
