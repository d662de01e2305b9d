// The demo's checkpoint: the weights and the number of steps done, written to
// a temporary file and renamed into place, so a reader sees the previous
// checkpoint or the new one, never a torn one.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace resilient::demo {

struct Checkpoint {
  int step = 0;                // steps done
  std::vector<float> weights;  // after `step` steps
};

// Writes `checkpoint` to `path` (through `path`.tmp and rename). Throws
// std::runtime_error naming the path on failure.
void saveCheckpoint(const std::string& path, const Checkpoint& checkpoint);

// The checkpoint at `path`, or nullopt when there is none. Throws
// std::runtime_error for a file that is not a checkpoint of `weights` values.
std::optional<Checkpoint> loadCheckpoint(const std::string& path, size_t weights);

// Writes the raw bytes of `values` to `path` (temporary file and rename).
void saveFloats(const std::string& path, const std::vector<float>& values);

}  // namespace resilient::demo
