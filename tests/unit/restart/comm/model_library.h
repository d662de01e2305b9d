// One build of the NCCL model (nccl_model.cc) as the tests drive it: its
// control block and the calls a user's program makes (collectives, groups),
// looked up in the copy the restart library loaded.
#pragma once

#include <dlfcn.h>

#include <stdexcept>
#include <string>

#include "nccl/api.h"
#include "restart/comm/nccl_library.h"
#include "tests/unit/restart/comm/nccl_model.h"

namespace resilient::restart::commtest {

class ModelLibrary {
 public:
  explicit ModelLibrary(const char* path) {
    (void)comm::NcclLibrary::load(path);  // the copy the library drives
    handle_ = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (handle_ == nullptr) {
      throw std::runtime_error(std::string("the NCCL model is not loaded: ") + path);
    }
  }
  ~ModelLibrary() { dlclose(handle_); }
  ModelLibrary(const ModelLibrary&) = delete;
  ModelLibrary& operator=(const ModelLibrary&) = delete;

  NcclModelControl& control() const { return *fn<nccl_model_control_fn>("nccl_model_control")(); }
  void failTransfer(void* comm, ncclResult_t r) const {
    fn<nccl_model_fail_transfer_fn>("nccl_model_fail_transfer")(comm, r);
  }
  void setAsyncError(void* comm, ncclResult_t r) const {
    fn<nccl_model_set_async_error_fn>("nccl_model_set_async_error")(comm, r);
  }
  void setGraphRefs(void* comm, int n) const {
    fn<nccl_model_set_graph_refs_fn>("nccl_model_set_graph_refs")(comm, n);
  }
  // A float sum of `count` values; NCCL's result.
  ncclResult_t allReduce(const float* send, float* recv, size_t count, void* comm) const {
    return static_cast<ncclResult_t>(fn<nccl_model_all_reduce_fn>("ncclAllReduce")(
        send, recv, count, kNcclModelFloat32, kNcclModelSum, comm, nullptr));
  }
  // Our cudaStreamSynchronize (see nccl_model.h).
  ncclResult_t wait(void* comm, int timeoutMs) const {
    return static_cast<ncclResult_t>(fn<nccl_model_wait_fn>("nccl_model_wait")(comm, timeoutMs));
  }
  long opCount(void* comm) const { return fn<nccl_model_op_count_fn>("nccl_model_op_count")(comm); }
  ncclResult_t groupStart() const { return fn<ncclResult_t (*)()>("ncclGroupStart")(); }
  ncclResult_t groupEnd() const { return fn<ncclGroupEnd_fn>("ncclGroupEnd")(); }
  ncclResult_t asyncError(void* comm) const {
    ncclResult_t s = ncclSuccess;
    const ncclResult_t r =
        fn<ncclCommGetAsyncError_fn>("ncclCommGetAsyncError")(static_cast<ncclComm_t>(comm), &s);
    return r != ncclSuccess ? r : s;
  }
  // Polls a non-blocking communicator until it is no longer in progress.
  ncclResult_t settle(void* comm) const {
    ncclResult_t s = ncclInProgress;
    while (s == ncclInProgress) {
      s = asyncError(comm);
    }
    return s;
  }

 private:
  template <class F>
  F fn(const char* name) const {
    auto f = reinterpret_cast<F>(dlsym(handle_, name));
    if (f == nullptr) {
      throw std::runtime_error(std::string("the NCCL model lacks ") + name);
    }
    return f;
  }

  void* handle_ = nullptr;
};

}  // namespace resilient::restart::commtest
