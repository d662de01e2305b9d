#include "store/backoff.h"

#include <algorithm>

namespace resilient::store {

Backoff::Backoff(std::chrono::milliseconds initial, std::chrono::milliseconds max, double factor,
                 uint64_t seed)
    : initial_(std::max(initial, std::chrono::milliseconds(1))),
      max_(std::max(max, initial_)),
      factor_(std::max(factor, 1.0)),
      current_(static_cast<double>(initial_.count())),
      rng_(seed != 0 ? seed : std::random_device{}()) {}

std::chrono::milliseconds Backoff::next() {
  const double base = current_;
  current_ = std::min(current_ * factor_, static_cast<double>(max_.count()));
  ++attempts_;
  std::uniform_real_distribution<double> jitter(0.5, 1.5);
  const double ms = std::min(base * jitter(rng_), static_cast<double>(max_.count()));
  return std::chrono::milliseconds(std::max<int64_t>(1, static_cast<int64_t>(ms)));
}

void Backoff::reset() noexcept {
  current_ = static_cast<double>(initial_.count());
  attempts_ = 0;
}

}  // namespace resilient::store
