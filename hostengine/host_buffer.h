// A page-aligned host buffer whose pages the kernel zeroes on first touch
// (an anonymous private mapping), so that making one costs nothing per byte:
// the host communicator's buffers are sized for the largest block of user
// data (megabytes each), while its operations often move a few kilobytes,
// and every restart makes them anew on every rank at once. Zeroing them up
// front (memset, or calloc on a recycled heap) faulted in and cleared every
// page of every rank's buffers before the first operation.
#pragma once

#include <cstddef>

namespace resilient::hostengine {

class HostBuffer {
 public:
  HostBuffer() = default;
  // `bytes` zeroed bytes (at least one page); empty on failure (errno set).
  static HostBuffer zeroed(size_t bytes) noexcept;
  ~HostBuffer();
  HostBuffer(HostBuffer&& other) noexcept;
  HostBuffer& operator=(HostBuffer&& other) noexcept;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  std::byte* data() const noexcept { return data_; }
  bool empty() const noexcept { return data_ == nullptr; }
  // The mapping's size: `bytes` rounded up to whole pages.
  size_t mappedBytes() const noexcept { return mapped_; }

 private:
  void release() noexcept;

  std::byte* data_ = nullptr;
  size_t mapped_ = 0;
};

}  // namespace resilient::hostengine
