// Which elements a rank sends and receives at each step of a pipelined ring
// all-reduce: reduce-scatter then all-gather over N segments, each step cut
// into the same number of chunks.
//
// Segment s is the s-th of N near-equal parts of the buffer (sizes differ by
// at most one element). Rank r, with prev = r-1 and next = r+1 (mod N):
//   reduce-scatter step k (0 <= k < N-1): sends segment r-k, receives
//     segment r-k-1 and adds it to its own; after the last step rank r holds
//     the full sum of segment r+1;
//   all-gather step k (0 <= k < N-1): sends segment r+1-k, receives segment
//     r-k into place.
// Transfers are numbered item = step * chunksPerStep + chunk (steps 0..N-2
// are the reduce-scatter, N-1..2N-3 the all-gather). Item j that rank r
// sends is item j that rank r+1 receives, with the same element range.
// Chunk c of a segment is the c-th of chunksPerStep near-equal parts.
#pragma once

#include <cstddef>

namespace resilient::hostengine {

struct ElementRange {
  size_t offset = 0;
  size_t count = 0;
  bool operator==(const ElementRange&) const = default;
};

// Part `index` of `parts` near-equal parts of `whole` (the first `count %
// parts` parts are one element longer).
ElementRange splitRange(ElementRange whole, size_t parts, size_t index) noexcept;

// The ring a RingSchedule plans: its size, this rank's place and the buffer.
struct RingScheduleOptions {
  int nranks = 2;            // >= 2
  int rank = 0;              // 0 <= rank < nranks
  size_t count = 0;          // elements of the buffer
  size_t chunkElements = 1;  // >= 1: the largest chunk
};

class RingSchedule {
 public:
  explicit RingSchedule(const RingScheduleOptions& options) noexcept;

  int nranks() const noexcept { return nranks_; }
  int rank() const noexcept { return rank_; }
  size_t count() const noexcept { return count_; }
  // 2(N-1)
  size_t steps() const noexcept { return 2 * static_cast<size_t>(nranks_ - 1); }
  // At least 1, so that even an empty buffer moves one (empty) message per step.
  size_t chunksPerStep() const noexcept { return chunksPerStep_; }
  size_t items() const noexcept { return steps() * chunksPerStep_; }

  ElementRange segment(int s) const noexcept;
  int sendSegment(size_t step) const noexcept;
  int recvSegment(size_t step) const noexcept;
  // The segment this rank holds the full sum of after the reduce-scatter: r+1.
  int ownedSegment() const noexcept { return wrap(rank_ + 1); }

  ElementRange sendChunk(size_t item) const noexcept;
  ElementRange recvChunk(size_t item) const noexcept;
  // True for reduce-scatter items: the received chunk is added, not stored.
  bool isReduce(size_t item) const noexcept { return item / chunksPerStep_ + 1 < nranksU(); }

  // Receive items that must be complete (received, and added for the
  // reduce-scatter) before item `item` may be sent: the chunk it forwards.
  size_t recvsBeforeSend(size_t item) const noexcept;
  // Send items that must be complete before item `item` may be received: an
  // all-gather chunk lands where this rank sent from in the reduce-scatter.
  size_t sendsBeforeRecv(size_t item) const noexcept;

 private:
  int wrap(long s) const noexcept;
  size_t nranksU() const noexcept { return static_cast<size_t>(nranks_); }

  int nranks_;
  int rank_;
  size_t count_;
  size_t chunksPerStep_;
};

}  // namespace resilient::hostengine
