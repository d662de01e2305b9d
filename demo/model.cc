#include "model.h"

#include <cstdint>

namespace resilient::demo {

namespace {

// splitmix64: a fixed, portable pseudo-random sequence.
uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// A value in [-1, 1) from (shard, sample, column).
float uniform(int shard, int sample, int column) {
  const uint64_t key = (static_cast<uint64_t>(shard) << 40) ^
                       (static_cast<uint64_t>(sample) << 16) ^ static_cast<uint64_t>(column);
  return static_cast<float>(static_cast<double>(mix(key) >> 11) * 0x1.0p-52 - 1.0);
}

// The weights the data is generated from (the model should find them).
float trueWeight(int j) {
  return 0.5F * static_cast<float>(j % 5) - 1.0F;
}

}  // namespace

Shard makeShard(int index) {
  Shard s;
  s.x.resize(static_cast<size_t>(kSamplesPerShard) * kFeatures);
  s.y.resize(kSamplesPerShard);
  for (int i = 0; i < kSamplesPerShard; ++i) {
    float y = trueWeight(kFeatures);  // bias
    for (int j = 0; j < kFeatures; ++j) {
      const float v = uniform(index, i, j);
      s.x[static_cast<size_t>(i) * kFeatures + j] = v;
      y += trueWeight(j) * v;
    }
    s.y[i] = y + 0.05F * uniform(index, i, kFeatures);  // noise
  }
  return s;
}

void shardSums(const Shard& shard, const std::vector<float>& weights, std::vector<float>& out) {
  out.assign(kWeights + 1, 0.0F);
  for (int i = 0; i < kSamplesPerShard; ++i) {
    const float* x = &shard.x[static_cast<size_t>(i) * kFeatures];
    float prediction = weights[kFeatures];
    for (int j = 0; j < kFeatures; ++j) {
      prediction += weights[j] * x[j];
    }
    const float error = prediction - shard.y[i];
    for (int j = 0; j < kFeatures; ++j) {
      out[j] += 2.0F * error * x[j];
    }
    out[kFeatures] += 2.0F * error;
    out[kWeights] += error * error;
  }
}

float sgdStep(std::vector<float>& weights, const std::vector<float>& sums, size_t totalSamples,
              float learningRate) {
  const float scale = learningRate / static_cast<float>(totalSamples);
  for (int j = 0; j < kWeights; ++j) {
    weights[j] -= scale * sums[j];
  }
  return sums[kWeights] / static_cast<float>(totalSamples);
}

}  // namespace resilient::demo
