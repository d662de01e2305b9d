#include "hostengine/ring_schedule.h"

#include <algorithm>

namespace resilient::hostengine {

ElementRange splitRange(ElementRange whole, size_t parts, size_t index) noexcept {
  if (parts == 0 || index >= parts) {
    return {whole.offset + whole.count, 0};
  }
  const size_t base = whole.count / parts;
  const size_t extra = whole.count % parts;
  const size_t begin = index * base + std::min(index, extra);
  return {whole.offset + begin, base + (index < extra ? 1 : 0)};
}

RingSchedule::RingSchedule(const RingScheduleOptions& options) noexcept
    : nranks_(std::max(options.nranks, 2)),
      rank_(options.rank),
      count_(options.count),
      chunksPerStep_(1) {
  const size_t largestSegment = (count_ + nranksU() - 1) / nranksU();
  const size_t chunk = std::max<size_t>(options.chunkElements, 1);
  chunksPerStep_ = std::max<size_t>(1, (largestSegment + chunk - 1) / chunk);
}

int RingSchedule::wrap(long s) const noexcept {
  const long n = nranks_;
  return static_cast<int>(((s % n) + n) % n);
}

ElementRange RingSchedule::segment(int s) const noexcept {
  return splitRange({0, count_}, nranksU(), static_cast<size_t>(wrap(s)));
}

int RingSchedule::sendSegment(size_t step) const noexcept {
  const long k = static_cast<long>(step);
  const long half = nranks_ - 1;
  return k < half ? wrap(rank_ - k) : wrap(rank_ + 1 - (k - half));
}

int RingSchedule::recvSegment(size_t step) const noexcept {
  const long k = static_cast<long>(step);
  const long half = nranks_ - 1;
  return k < half ? wrap(rank_ - k - 1) : wrap(rank_ - (k - half));
}

ElementRange RingSchedule::sendChunk(size_t item) const noexcept {
  return splitRange(segment(sendSegment(item / chunksPerStep_)), chunksPerStep_,
                    item % chunksPerStep_);
}

ElementRange RingSchedule::recvChunk(size_t item) const noexcept {
  return splitRange(segment(recvSegment(item / chunksPerStep_)), chunksPerStep_,
                    item % chunksPerStep_);
}

size_t RingSchedule::recvsBeforeSend(size_t item) const noexcept {
  // Step 0 sends this rank's own input; every later step forwards the chunk
  // received one step earlier.
  return item < chunksPerStep_ ? 0 : item - chunksPerStep_ + 1;
}

size_t RingSchedule::sendsBeforeRecv(size_t item) const noexcept {
  // All-gather step k receives segment r-k, which the reduce-scatter sent at step k.
  const size_t firstGather = (nranksU() - 1) * chunksPerStep_;
  return item < firstGather ? 0 : item - firstGather + 1;
}

}  // namespace resilient::hostengine
