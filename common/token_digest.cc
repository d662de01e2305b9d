#include "common/token_digest.h"

namespace resilient {

uint64_t tokenDigest(std::string_view token) noexcept {
  if (token.empty()) {
    return 0;
  }
  // FNV-1a over the bytes, then a 64-bit finalizer so that similar tokens
  // differ in every bit.
  uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : token) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h == 0 ? 1 : h;
}

}  // namespace resilient
