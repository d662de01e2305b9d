#include "checkpoint.h"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <system_error>

#include "common/file_replace.h"

namespace resilient::demo {

namespace {

constexpr uint32_t kMagic = 0x52444d31;  // "RDM1"

// A whole file at once: a reader finds the old checkpoint or the new one.
void writeFile(const std::string& path, const std::string& bytes) {
  if (Status s = replaceFile(path, bytes); !s.ok()) {
    throw std::runtime_error(s.toString());
  }
}

template <class T>
void append(std::string& out, const T& value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

}  // namespace

void saveCheckpoint(const std::string& path, const Checkpoint& checkpoint) {
  std::string bytes;
  append(bytes, kMagic);
  append(bytes, static_cast<int32_t>(checkpoint.step));
  append(bytes, static_cast<uint32_t>(checkpoint.weights.size()));
  bytes.append(reinterpret_cast<const char*>(checkpoint.weights.data()),
               checkpoint.weights.size() * sizeof(float));
  writeFile(path, bytes);
}

std::optional<Checkpoint> loadCheckpoint(const std::string& path, size_t weights) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return std::nullopt;
  }
  uint32_t magic = 0;
  int32_t step = 0;
  uint32_t count = 0;
  in.read(reinterpret_cast<char*>(&magic), sizeof magic);
  in.read(reinterpret_cast<char*>(&step), sizeof step);
  in.read(reinterpret_cast<char*>(&count), sizeof count);
  Checkpoint c;
  c.step = step;
  c.weights.resize(weights);
  if (in && magic == kMagic && count == weights && step >= 0) {
    in.read(reinterpret_cast<char*>(c.weights.data()),
            static_cast<std::streamsize>(weights * sizeof(float)));
  }
  if (!in || magic != kMagic || count != weights || step < 0) {
    throw std::runtime_error(path + " is not a checkpoint of " + std::to_string(weights) +
                             " weights");
  }
  return c;
}

void saveFloats(const std::string& path, const std::vector<float>& values) {
  writeFile(path, std::string(reinterpret_cast<const char*>(values.data()),
                                values.size() * sizeof(float)));
}

}  // namespace resilient::demo
