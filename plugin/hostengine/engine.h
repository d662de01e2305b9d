// The host engine: a small collective library over a net plugin, for runs
// without a GPU (design.md, "The host engine"). It drives a
// transport::Transport (in practice an ExternalTransport: any NCCL net plugin
// .so loaded as NCCL loads it) with NCCL's call contract: non-blocking
// connect/accept polled, a bounded number of outstanding requests per comm,
// grouped receives, NCCL's tags, test() polling, close on abort.
//
// One Engine per rank (process). setup() builds the connections the pattern
// needs: every rank listens once per peer it receives from, the 128-byte
// handles are exchanged out of band (OutOfBand), then each rank connects to
// the peers it sends to and accepts from the peers it receives from, all
// polled together until done or the timeout. run() executes one operation
// on host buffers and validates every byte of its result. It is test and
// demo infrastructure, not NCCL.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "plugin/hostengine/pattern.h"
#include "plugin/hostengine/pipeline.h"
#include "plugin/hostengine/rendezvous.h"
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
  // `iteration`. barrier: meet the other ranks out of band first, so that
  // the timed part starts together (ping-pong synchronises on its own).
  IterationResult run(size_t bytes, uint64_t iteration, bool barrier);
  // Deregisters and closes every comm, then finalizes the plugin context;
  // also right after a fault, with requests still outstanding (NCCL's abort).
  void close() noexcept;

  const transport::Properties& properties() const noexcept { return props_; }
  int piecesPerItem() const noexcept { return limits_.maxPieces; }
  int depth() const noexcept { return limits_.depth; }
  size_t chunkBytes() const noexcept { return chunk_; }
  const EngineOptions& options() const noexcept { return options_; }

 private:
  enum BufferId { kInput = 0, kOutput = 1, kStaging = 2, kBufferCount = 3 };
  struct Link;
  struct Buffer;

  Link& link(int peer) noexcept;
  int next() const noexcept { return (options_.rank + 1) % options_.nranks; }
  int prev() const noexcept { return (options_.rank + options_.nranks - 1) % options_.nranks; }
  std::optional<Fault> setupFault(const char* call, int peer, Status status, uint64_t startNs);
  std::optional<Fault> connectAll(uint64_t startNs);
  std::optional<Fault> registerBuffers(uint64_t startNs);
  int pieces(char* data, size_t bytes, size_t unit, void* mhandle, Piece* out) const noexcept;
  char* buffer(BufferId id) const noexcept;

  IterationResult runPingPong(size_t bytes, uint64_t iteration);
  IterationResult runSendRecv(size_t bytes, uint64_t iteration, bool barrier);
  IterationResult runAllReduce(size_t bytes, uint64_t iteration, bool barrier);
  IterationResult runAllToAll(size_t bytes, uint64_t iteration, bool barrier);
  // Barrier (when asked); returns the start time, or the fault of the barrier.
  std::optional<Fault> meet(bool barrier, uint64_t* startNs);
  std::optional<Fault> drive(std::initializer_list<Stream*> streams, uint64_t startNs,
                             uint64_t* errors);
  std::optional<Fault> drive(Stream* const* streams, size_t count, uint64_t startNs,
                             uint64_t* errors);

  transport::Transport& transport_;
  OutOfBand& oob_;
  EngineOptions options_;
  transport::Properties props_;
  PipelineLimits limits_;
  size_t chunk_ = kDefaultChunkBytes;
  size_t maxBytes_ = 0;
  void* ctx_ = nullptr;
  bool contextLive_ = false;
  std::vector<Link> links_;  // one per peer rank (index = rank); sized once in setup
  std::vector<Buffer> buffers_;
};

}  // namespace resilient::hostengine
