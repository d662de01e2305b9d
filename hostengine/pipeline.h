// The request pipeline of the host engine: what NCCL's proxy progress thread
// does with a net plugin, on host buffers.
//
// A Stream is one direction of one connection during one operation: an
// ordered list of items (chunks). A send item goes out as one isend per
// piece; a receive item is one irecv of n pieces (a grouped receive when
// n > 1). Items are posted in order while the connection has room (at most
// `depth` receive requests, depth * pieces send requests, bounded by NCCL's
// 32 per comm) and the item's dependency is met (`ready`); the oldest
// outstanding request of each stream is polled with test(), as NCCL polls
// the oldest step. A stream may depend on the progress of another (the ring
// all-reduce forwards what it received), so all streams of an operation are
// driven together by one loop, which never blocks.
//
// Tags follow NCCL: an isend carries the sender's rank, an irecv expects the
// remote rank. The pieces of one grouped receive need distinct tags (NCCL
// groups receives from several peers that share a comm, so its tags differ
// by peer); piece p stands for a virtual sender rank + p * nranks, which
// keeps piece 0, and every ungrouped message, exactly NCCL's tag.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "common/status.h"
#include "plugin/transport/transport.h"

namespace resilient::hostengine {

// Largest n of a grouped receive the engine uses.
inline constexpr int kMaxPieces = 8;
// Outstanding requests of one stream (NCCL_NET_MAX_REQUESTS x kMaxPieces sends).
inline constexpr size_t kMaxOutstanding = static_cast<size_t>(transport::kMaxRequests) * kMaxPieces;

int messageTag(int senderRank, int nranks, int piece) noexcept;

// Part of a message: a buffer and the region of its registration (owned by
// the engine's link, transport.h).
struct Piece {
  std::byte* data = nullptr;
  size_t bytes = 0;
  transport::MemoryRegion* region = nullptr;
};

// How splitPieces cuts a message.
struct SplitOptions {
  size_t unit = 1;           // pieces are whole units (0 counts as 1)
  size_t minPieceBytes = 0;  // 0: as many pieces as units, up to maxPieces
  int maxPieces = kMaxPieces;
};

// Splits `whole` into n near-equal pieces of whole units, n =
// clamp(bytes / minPieceBytes, 1, maxPieces), each with whole's region;
// returns n.
int splitPieces(const Piece& whole, const SplitOptions& options, Piece* out) noexcept;

// What Fault::seen records of a failure, and what it measures it against.
struct FaultSighting {
  const char* call = "";         // as Fault::call
  int peer = -1;                 // as Fault::peer
  Status status{};               // as Fault::status
  uint64_t startNs = 0;          // monotonicNs() at the start of the iteration (or of the setup)
  uint64_t warningBaseline = 0;  // a plugin log sequence: only a later WARN is quoted
};

// A failed call, or a wait that outlived its deadline.
struct Fault {
  std::string call;           // "isend", "irecv", "test(isend)", "test(irecv)", "connect", ...
  int peer = -1;              // rank at the other end of the connection; -1: none
  Status status;              // what the call returned (or our timeout)
  bool timedOut = false;      // our own deadline, not an error from the plugin
  bool aborted = false;       // the engine's owner aborted the operation (Engine::abort)
  std::string pluginWarning;  // the plugin's latest WARN since setup, if any
  double sinceStartMs = 0;    // from the start of the iteration (or of the setup)
  uint64_t detectedNs = 0;    // monotonicNs() when it was seen
  size_t bytes = 0;           // size of the operation
  uint64_t iteration = 0;

  // A fault seen now, sinceStartMs after startNs, with the plugin's latest
  // WARN when it came after `warningBaseline`.
  static Fault seen(FaultSighting sighting);

  // "test(irecv) from rank 2 after 12.345 ms: remote error: ... [plugin: ...]"
  std::string describe() const;
};

class Stream {
 public:
  enum class Direction { kSend, kRecv };

  // The direction is the comm's: a send stream posts isends on `comm`, a
  // receive stream irecvs (the comm outlives the stream).
  Stream(transport::SendComm* comm, int peer, size_t items) noexcept;
  Stream(transport::RecvComm* comm, int peer, size_t items) noexcept;

  // Fills the pieces of `item` and returns their count (1..kMaxPieces).
  std::function<int(size_t item, Piece* pieces)> describe;
  // May `item` be posted now? Empty: always.
  std::function<bool(size_t item)> ready;
  // Called once per item when it completed (receive: before done() counts it).
  std::function<void(size_t item)> completed;

  Direction direction() const noexcept { return direction_; }
  int peer() const noexcept { return peer_; }
  size_t items() const noexcept { return items_; }
  size_t posted() const noexcept { return posted_; }
  size_t done() const noexcept { return done_; }
  bool finished() const noexcept { return done_ == items_; }

 private:
  friend class Pipeline;
  struct Outstanding {
    transport::Request* request = nullptr;  // its comm's, until test() says done
    size_t item = 0;
    int piece = 0;                            // send: which piece this request carries
    int pieces = 1;                           // pieces of the item
    std::array<size_t, kMaxPieces> expect{};  // receive: sizes the sender sends
    std::array<Piece, kMaxPieces> where{};    // receive: where they land (for iflush)
  };

  size_t outstanding() const noexcept { return tail_ - head_; }

  Direction direction_;
  transport::SendComm* sendComm_ = nullptr;  // a send stream's
  transport::RecvComm* recvComm_ = nullptr;  // a receive stream's
  int peer_;
  size_t items_;
  size_t posted_ = 0;
  size_t done_ = 0;
  int piecesPosted_ = 0;  // send: pieces of item posted_ already posted
  int piecesOfItem_ = 0;
  std::array<Piece, kMaxPieces> pieces_{};
  std::array<Outstanding, kMaxOutstanding> ring_{};
  size_t head_ = 0;
  size_t tail_ = 0;
};

// What a plugin did that NCCL tolerates and a conformance tester reports
// (the engine goes on as NCCL does). Counted by the pipelines of one engine.
struct ConformanceNotes {
  // Completed receives whose test() left `sizes` unwritten: NCCL uses the
  // received size only for the GPU flush and the profiler's byte counts, so
  // it goes on with the posted size; so does the engine.
  std::atomic<uint64_t> sizesNotReported{0};
};

struct PipelineLimits {
  int rank = 0;
  int nranks = 1;
  int depth = 8;            // receive requests per stream; sends: depth * maxPieces
  int maxPieces = 1;        // largest n of a grouped receive
  bool forceFlush = false;  // the plugin's forceFlush: iflush every completed receive, as NCCL does
  uint64_t warningBaseline = 0;  // plugin WARNs up to this sequence are not reported
  // Set from another thread: drive() returns an aborted Fault at its next pass.
  const std::atomic<bool>* abortFlag = nullptr;
  ConformanceNotes* notes = nullptr;  // where tolerated deviations are counted (may be null)
};

// The Fault of an operation given up because its owner aborted it.
Fault abortedFault(const char* call, uint64_t startNs);

class Pipeline {
 public:
  // `transport`: the one whose comms the streams use (asked whether its
  // receive comms have irecvConsumed).
  Pipeline(const transport::Transport& transport, const PipelineLimits& limits) noexcept
      : limits_(limits), consumes_(transport.capabilities().irecvConsumed) {}

  // Drives `streams` until all are finished (nullopt), a call fails or the
  // deadline passes (the fault). *sizeErrors grows by the bytes of every
  // received piece whose reported size differs from the expected one; a
  // size test() did not report at all is NCCL's tolerated case
  // (ConformanceNotes), not an error.
  std::optional<Fault> drive(Stream* const* streams, size_t count, uint64_t startNs,
                             uint64_t deadlineNs, uint64_t* sizeErrors);

 private:
  Status postSends(Stream& s);
  Status postRecvs(Stream& s);
  Status testOldest(Stream& s, uint64_t* sizeErrors);
  Status flush(Stream& s, const Stream::Outstanding& o, const int* sizes);

  PipelineLimits limits_;
  bool consumes_;  // the plugin has irecvConsumed
  const char* failedCall_ = "";
  uint64_t deadlineNs_ = 0;
};

}  // namespace resilient::hostengine
