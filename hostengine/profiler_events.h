// The host engine's profiler client: it drives the profiler plugin that the
// engine's net plugin library exports (ncclProfiler_v6), the way NCCL 2.28
// drives it for a collective that runs on one channel
// (docs/reference/nccl-abi.md §2.1, §2.6, §2.7), so that a run without a GPU
// fills the profiler's communicator table and flight recorder (blackbox) as
// a run under NCCL does.
//
// Per communicator (Engine::setup): init, with the communicator's hash, name,
// nodes, ranks and rank and the engine's plugin logger; NCCL's activation
// mask is one process-wide int that every init may write. Per operation, with
// the mask read when it is enqueued, only the events that mask asks for (NCCL
// also emits the parents that carry the hierarchy of a bit it asks for):
//   enqueued():  GroupApi start, state GroupStartApiStop, CollApi start,
//                state GroupEndApiStart, KernelLaunch start/stop, Group start,
//                Coll start (seqNumber: per function, RING, SIMPLE, one
//                channel), Coll stop, Group stop, GroupApi stop, CollApi stop
//   started():   KernelCh start (channel 0, parent the Coll, no GPU time)
//   completed(): state KernelChStop, KernelCh stop
// An operation that fails gets no completed(): its kernel-channel event stays
// open, as under NCCL, whose progress thread stops emitting at a network error
// and never closes the events in flight; close() finalizes the communicator,
// and the profiler records what was in flight as abandoned (or hung).
// close(): finalize, then our reference on the library is dropped.
//
// Never a failure for the engine: without a profiler in the library (or with
// an init that fails: one log line) nothing is emitted. The operations take
// no lock and allocate nothing; start/stop/record results are ignored, as NCCL
// ignores them. Called from: the engine's owner thread (one operation at a
// time).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "plugin/transport/transport.h"

namespace resilient::hostengine {

// NCCL's ncclProfiler_v6_t, opaque here: only profiler_events.cc sees the ABI.
struct ProfilerTable;

// ncclFunc_t values of the operations the engine runs (their names are
// NCCL's: "Broadcast", "AllReduce", "SendRecv", "AlltoAll").
enum class ProfiledFunc : uint8_t {
  kBroadcast = 0,
  kAllReduce = 4,
  kSendRecv = 5,
  kAllToAll = 8,
};
inline constexpr size_t kProfiledFuncSlots = 12;  // ncclFunc_t values 0..11

// One operation as NCCL's Coll descriptor describes it.
struct ProfiledColl {
  ProfiledFunc func = ProfiledFunc::kAllReduce;
  size_t count = 0;                      // elements
  const char* datatype = "ncclFloat32";  // NCCL's name (a static string)
  int root = 0;
  const void* sendBuff = nullptr;
  void* recvBuff = nullptr;
};

// What the profiler's init gets.
struct ProfiledComm {
  uint64_t commId = 0;  // commHash: the same on every rank
  const char* name = nullptr;
  int nNodes = 1;
  int nranks = 0;
  int rank = 0;
};

class ProfilerEvents {
 public:
  ProfilerEvents() = default;
  ~ProfilerEvents() { close(); }
  ProfilerEvents(const ProfilerEvents&) = delete;
  ProfilerEvents& operator=(const ProfilerEvents&) = delete;

  // Initializes `table` when given (tests), else the ncclProfiler_v6 that the
  // library of `transport` exports (a net plugin loaded as NCCL loads it);
  // nothing happens when there is none. Once per communicator.
  void open(transport::Transport& transport, const ProfilerTable* table,
            const ProfiledComm& comm) noexcept;
  // finalize (when init gave a context), then the library reference goes.
  // Idempotent.
  void close() noexcept;

  // Whether init succeeded: the operations' events go to the profiler.
  bool active() const noexcept { return table_ != nullptr; }

  // One operation (hot path): see the header comment.
  void enqueued(const ProfiledColl& coll) noexcept;
  void started() noexcept;
  void completed() noexcept;

 private:
  const ProfilerTable* table_ = nullptr;  // set while active
  void* library_ = nullptr;               // our dlopen reference, or nullptr
  void* context_ = nullptr;               // what init returned (may be nullptr)
  int rank_ = 0;
  std::array<uint64_t, kProfiledFuncSlots> seqNumbers_{};  // per function, as NCCL's
  // The operation in flight: the mask it was enqueued with and its handles.
  int opMask_ = 0;
  void* coll_ = nullptr;
  void* kernel_ = nullptr;
};

}  // namespace resilient::hostengine
