// Exponential backoff with jitter for connection retries: the delay starts at
// `initial`, grows by `factor` per attempt up to `max`, and each delay is
// drawn uniformly from [delay/2, delay*3/2) (capped at `max`), so thousands of
// clients that failed together do not retry together.
#pragma once

#include <chrono>
#include <cstdint>
#include <random>

namespace resilient::store {

class Backoff {
 public:
  Backoff(std::chrono::milliseconds initial, std::chrono::milliseconds max, double factor = 2.0,
          uint64_t seed = 0);

  // The delay before the next attempt.
  std::chrono::milliseconds next();
  int attempts() const noexcept { return attempts_; }
  void reset() noexcept;

 private:
  std::chrono::milliseconds initial_;
  std::chrono::milliseconds max_;
  double factor_;
  double current_;
  int attempts_ = 0;
  std::mt19937_64 rng_;
};

}  // namespace resilient::store
