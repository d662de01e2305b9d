#include "hostengine/host_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

namespace resilient::hostengine {

HostBuffer HostBuffer::zeroed(size_t bytes) noexcept {
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t rounded = (std::max<size_t>(bytes, 1) + page - 1) / page * page;
  void* p = mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  HostBuffer out;
  if (p != MAP_FAILED) {
    out.data_ = static_cast<std::byte*>(p);
    out.mapped_ = rounded;
  }
  return out;
}

HostBuffer::~HostBuffer() {
  release();
}

HostBuffer::HostBuffer(HostBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), mapped_(std::exchange(other.mapped_, 0)) {}

HostBuffer& HostBuffer::operator=(HostBuffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    mapped_ = std::exchange(other.mapped_, 0);
  }
  return *this;
}

void HostBuffer::release() noexcept {
  if (data_ != nullptr) {
    (void)munmap(data_, mapped_);
    data_ = nullptr;
    mapped_ = 0;
  }
}

}  // namespace resilient::hostengine
