// A comm's requests: a fixed pool made when the comm is, handed out and
// taken back without locks or allocation (the data path). One thread at a
// time uses a pool (the comm's caller, transport.h).
#pragma once

#include <cstddef>
#include <vector>

namespace resilient::transport {

// R: the transport's request type (usually derived from Request).
template <class R>
class RequestPool {
 public:
  explicit RequestPool(size_t size) : slots_(size), next_(size) {
    for (size_t i = 0; i < size; ++i) next_[i] = i + 1;
  }
  RequestPool(const RequestPool&) = delete;
  RequestPool& operator=(const RequestPool&) = delete;

  // nullptr when every request is out.
  R* acquire() noexcept {
    if (free_ >= slots_.size()) return nullptr;
    const size_t i = free_;
    free_ = next_[i];
    ++outstanding_;
    return &slots_[i];
  }
  // r: from this pool's acquire, not yet released.
  void release(R* r) noexcept {
    const size_t i = static_cast<size_t>(r - slots_.data());
    next_[i] = free_;
    free_ = i;
    --outstanding_;
  }
  bool owns(const R* r) const noexcept {
    return r >= slots_.data() && r < slots_.data() + slots_.size();
  }
  size_t outstanding() const noexcept { return outstanding_; }
  size_t size() const noexcept { return slots_.size(); }
  // Every slot, out or not (to reset requests when the comm closes).
  std::vector<R>& slots() noexcept { return slots_; }

 private:
  std::vector<R> slots_;
  std::vector<size_t> next_;
  size_t free_ = 0;
  size_t outstanding_ = 0;
};

}  // namespace resilient::transport
