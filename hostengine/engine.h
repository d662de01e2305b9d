// The host engine: a small collective library over a net plugin, for runs
// without a GPU (docs/design.md, "The host engine"). It drives a
// transport::Transport (in practice an ExternalTransport: any NCCL net plugin
// .so loaded as NCCL loads it) with NCCL's call contract: non-blocking
// connect/accept polled, a bounded number of outstanding requests per comm,
// grouped receives, NCCL's tags, test() polling, close on abort.
//
// One Engine per rank (process). setup() builds the connections the pattern
// needs: every rank listens once per peer it receives from, the 128-byte
// handles are exchanged out of band (OutOfBand: all-to-all gathers them all;
// a ring rank takes only the next rank's, OutOfBand::exchangeWith), then each
// rank connects to the peers it sends to and accepts from the peers it
// receives from, all polled together until done or the timeout. run() executes one operation
// on host buffers and validates every byte of its result. It is test and
// demo infrastructure, not NCCL.
//
// The user-data operations (allReduceSum, broadcast, barrier) serve the
// restart library's host communicator: the same ring and pipeline on the
// caller's data, copied through the registered buffers in blocks of at most
// setup's maxBytes. They need Pattern::kAllReduce (the ring's connections).
// abort() may be called from any thread: the operation in flight (or the
// connection setup) returns a Fault with `aborted` set at the pipeline's next
// pass, and every later one at once; close() still runs on the owner's thread.
//
// A net plugin library that exports ncclProfiler_v6 (ours does) gets its
// profiler driven as NCCL drives it (profiler_events.h): init at setup, each
// operation of run() and each user-data operation one collective on one
// channel, finalize at close.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hostengine/pattern.h"
#include "hostengine/pipeline.h"
#include "hostengine/profiler_events.h"
#include "hostengine/rendezvous.h"
#include "plugin/transport/transport.h"

namespace resilient::hostengine {

inline constexpr size_t kDefaultChunkBytes = size_t{512} << 10;
inline constexpr size_t kDefaultMinPieceBytes = size_t{128} << 10;

struct EngineOptions {
  int rank = 0;
  int nranks = 2;
  Pattern pattern = Pattern::kAllReduce;
  int device = 0;
  int depth = 8;                           // receive requests in flight per connection (1..32)
  size_t chunkBytes = kDefaultChunkBytes;  // largest item of a pipelined transfer
  int multiRecv = kMaxPieces;              // largest n of a grouped irecv (1: never grouped)
  size_t minPieceBytes = kDefaultMinPieceBytes;  // smallest piece of a grouped receive
  int64_t timeoutMs = 30000;                     // connection setup; one iteration
  uint64_t commId = 0;                           // handed to the plugin's init
  // The profiler's init (commId is its commHash): the communicator's name,
  // and the hosts among the ranks (1: one, or not known).
  std::string commName = "hostengine";
  int nNodes = 1;
  // Tests: the ncclProfiler_v6 to drive instead of the plugin library's.
  const ProfilerTable* profilerTable = nullptr;
};

struct IterationOptions {
  // Meet the other ranks out of band first, so that the timed part starts
  // together (ping-pong synchronises on its own).
  bool barrier = true;
};

struct IterationResult {
  double seconds = 0;   // the timed part (ping-pong: one way, on rank 0; 0 on rank 1)
  uint64_t errors = 0;  // wrong elements: floats for all-reduce, bytes otherwise
  std::optional<Fault> fault;
};

class Engine {
 public:
  Engine(transport::Transport& transport, OutOfBand& oob, const EngineOptions& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Plugin context, properties, connections, buffers for sizes up to maxBytes.
  std::optional<Fault> setup(size_t maxBytes);
  // One operation of `bytes` (pattern.h: effectiveBytes) with the data of
  // `iteration`.
  IterationResult run(size_t bytes, uint64_t iteration, const IterationOptions& options);
  // Deregisters and closes every comm, then finalizes the plugin context;
  // also right after a fault, with requests still outstanding (NCCL's abort).
  void close() noexcept;

  // out[i] = the sum over ranks of in[i]; in == out is allowed.
  std::optional<Fault> allReduceSum(const float* in, float* out, size_t count);
  // root's `bytes` at `data` to every rank's `data`.
  std::optional<Fault> broadcast(void* data, size_t bytes, int root);
  // Returns once every rank entered it (an all-reduce of nothing over the ring).
  std::optional<Fault> barrier();
  // Any thread, any time, more than once.
  void abort() noexcept { abort_.store(true, std::memory_order_relaxed); }
  bool aborted() const noexcept { return abort_.load(std::memory_order_relaxed); }
  // Deadline of each later operation (and of setup), from its start.
  void setTimeoutMs(int64_t timeoutMs) noexcept { options_.timeoutMs = timeoutMs; }

  const transport::Properties& properties() const noexcept { return props_; }
  int piecesPerItem() const noexcept { return limits_.maxPieces; }
  int depth() const noexcept { return limits_.depth; }
  size_t chunkBytes() const noexcept { return chunk_; }
  const EngineOptions& options() const noexcept { return options_; }
  // What the plugin did that NCCL tolerates (one WARN the first time).
  const ConformanceNotes& conformance() const noexcept { return notes_; }
  // Whether a profiler gets the operations' events (its init succeeded).
  bool profiled() const noexcept { return profiler_.active(); }

 private:
  enum BufferId { kInput = 0, kOutput = 1, kStaging = 2, kBufferCount = 3 };
  struct Link;
  struct Buffer;
  struct Region;

  // engine.cc: lifecycle and setup (Link and Buffer: engine_internal.h).
  Link& link(int peer) noexcept;
  int next() const noexcept { return (options_.rank + 1) % options_.nranks; }
  int prev() const noexcept { return (options_.rank + options_.nranks - 1) % options_.nranks; }
  std::optional<Fault> setupFault(const char* call, int peer, Status status, uint64_t startNs);
  // Runs `work` (listen, connect/accept, regMr) on a thread of its own, as
  // NCCL's service thread: a plugin must not depend on the data path's thread.
  std::optional<Fault> onServiceThread(uint64_t startNs,
                                       const std::function<std::optional<Fault>()>& work);
  // The steps of setup(), in order.
  std::optional<Fault> checkRanks(uint64_t startNs);
  std::optional<Fault> openDevice(uint64_t startNs);  // context, profiler, the device's limits
  void planLinks();                                   // which peers we send to, receive from
  std::optional<Fault> listenAll(uint64_t startNs, std::string* blob);
  std::optional<Fault> takeHandles(const std::vector<std::string>& all, uint64_t startNs);
  std::optional<Fault> connectAll(uint64_t startNs);
  std::optional<Fault> allocateBuffers(size_t maxBytes, uint64_t startNs);
  std::optional<Fault> registerBuffers(uint64_t startNs);
  // The pieces of one item (at most limits_.maxPieces); returns their count.
  int pieces(const Region& region, Piece* out) const noexcept;
  std::byte* buffer(BufferId id) const noexcept;
  std::optional<Fault> drive(std::initializer_list<Stream*> streams, uint64_t startNs,
                             uint64_t* errors);
  std::optional<Fault> drive(Stream* const* streams, size_t count, uint64_t startNs,
                             uint64_t* errors);

  // engine_patterns.cc: run()'s patterns.
  IterationResult runPingPong(size_t bytes, uint64_t iteration);
  IterationResult runSendRecv(size_t bytes, uint64_t iteration, const IterationOptions& options);
  IterationResult runAllReduce(size_t bytes, uint64_t iteration, const IterationOptions& options);
  IterationResult runAllToAll(size_t bytes, uint64_t iteration, const IterationOptions& options);
  // The barrier (when options ask for it); returns the start time, or the
  // fault of the barrier. The operation's kernel channel starts here (the
  // wait for the peers is part of it, as in NCCL's kernel).
  std::optional<Fault> meet(const IterationOptions& options, uint64_t* startNs);

  // engine_ring.cc: the ring operations and the user-data collectives.
  // The ring all-reduce of the first `count` floats of the output buffer, in place.
  std::optional<Fault> ringAllReduce(size_t count, uint64_t startNs, uint64_t* sizeErrors);
  // The first `bytes` of root's output buffer into everybody's, along the ring.
  std::optional<Fault> ringBroadcast(size_t bytes, int root, uint64_t startNs,
                                     uint64_t* sizeErrors);
  // A fault unless the engine is set up for user data; named after `call`.
  std::optional<Fault> userOperationFault(const char* call, uint64_t startNs) const;
  // A fault for bytes that arrived with sizes other than expected.
  static Fault sizeFault(const char* call, uint64_t sizeErrors, uint64_t startNs);

  transport::Transport& transport_;
  OutOfBand& oob_;
  ConformanceNotes notes_;
  bool warnedSizes_ = false;
  EngineOptions options_;
  transport::Properties props_;
  PipelineLimits limits_;
  size_t chunk_ = kDefaultChunkBytes;
  size_t maxBytes_ = 0;
  std::unique_ptr<transport::Context> ctx_;  // empty: the transport keeps none
  std::vector<Link> links_;  // one per peer rank (index = rank); sized once in setup
  std::vector<Buffer> buffers_;
  // Each operation: enqueued() when it is called, started() when its data
  // movement begins, completed() only when it returns without a fault.
  ProfilerEvents profiler_;
  std::atomic<bool> abort_{false};
};

}  // namespace resilient::hostengine
