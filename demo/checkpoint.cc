#include "checkpoint.h"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <system_error>

namespace resilient::demo {

namespace {

constexpr uint32_t kMagic = 0x52444d31;  // "RDM1"

std::string failure(const char* what, const std::string& path) {
  return std::string(what) + " " + path + ": " + std::generic_category().message(errno);
}

// Writes `bytes` to path.tmp, flushes it and renames it to `path`.
void replaceFile(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) {
    throw std::runtime_error(failure("cannot create", tmp));
  }
  const bool written = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  if (std::fclose(f) != 0 || !written) {
    throw std::runtime_error(failure("cannot write", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    throw std::runtime_error(failure("cannot rename into", path));
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
  replaceFile(path, bytes);
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
  replaceFile(path, std::string(reinterpret_cast<const char*>(values.data()),
                                values.size() * sizeof(float)));
}

}  // namespace resilient::demo
