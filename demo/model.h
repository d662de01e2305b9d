// The demo's model: linear regression on synthetic data, split into a fixed
// number of shards. Everything is float and computed in a fixed order, so a
// shard's gradient is bitwise the same whichever process computes it.
#pragma once

#include <cstddef>
#include <vector>

namespace resilient::demo {

inline constexpr int kFeatures = 8;  // plus one bias weight
inline constexpr int kWeights = kFeatures + 1;
inline constexpr int kSamplesPerShard = 256;

// One shard of the data set: x (kSamplesPerShard x kFeatures) and y.
struct Shard {
  std::vector<float> x;
  std::vector<float> y;
};

// The deterministic data of shard `index` (same bytes on every call).
Shard makeShard(int index);

// The shard's contribution to the sums the ranks all-reduce: the gradient of
// the summed squared error (kWeights values) followed by the summed squared
// error itself. `out` gets kWeights + 1 values.
void shardSums(const Shard& shard, const std::vector<float>& weights, std::vector<float>& out);

// One SGD step from the all-reduced sums of `totalSamples` samples; returns
// the mean squared error before the step.
float sgdStep(std::vector<float>& weights, const std::vector<float>& sums, size_t totalSamples,
              float learningRate);

}  // namespace resilient::demo
