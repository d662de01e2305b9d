#include "plugin/net/handle_trailer.h"

#include <netinet/in.h>

#include <cstring>

#include "plugin/transport/transport.h"

namespace resilient::net {
namespace {

constexpr size_t kOffset = transport::kHandleSize - kTrailerSize;

// Layout (little-endian host order; both ends run the same build):
//   0 magic u32 | 4 version u16 | 6 family u16 | 8 nonce u64 | 16 pid u32 | 20 port u16 (net order)
//   22 reserved u16 | 24 address (16 bytes) | 40 checksum u64 over bytes 0..39
constexpr size_t kChecksumOffset = 40;

uint64_t checksum(const unsigned char* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (size_t i = 0; i < n; ++i) {
    h = (h ^ p[i]) * 0x100000001b3ull;
  }
  return h;
}

template <class T>
void put(unsigned char* base, size_t off, T v) {
  std::memcpy(base + off, &v, sizeof v);
}
template <class T>
T get(const unsigned char* base, size_t off) {
  T v;
  std::memcpy(&v, base + off, sizeof v);
  return v;
}

}  // namespace

void encodeTrailer(const HandleTrailer& trailer, std::byte* out) noexcept {
  auto* base = reinterpret_cast<unsigned char*>(out);
  std::memset(base, 0, kTrailerSize);
  put<uint32_t>(base, 0, kTrailerMagic);
  put<uint16_t>(base, 4, kTrailerVersion);
  put<uint16_t>(base, 6, trailer.liveness.ss_family);
  put<uint64_t>(base, 8, trailer.listenNonce);
  put<uint32_t>(base, 16, trailer.pid);
  if (trailer.liveness.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&trailer.liveness);
    put<uint16_t>(base, 20, a->sin_port);
    std::memcpy(base + 24, &a->sin_addr, 4);
  } else if (trailer.liveness.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&trailer.liveness);
    put<uint16_t>(base, 20, a->sin6_port);
    std::memcpy(base + 24, &a->sin6_addr, 16);
  }
  put<uint64_t>(base, kChecksumOffset, checksum(base, kChecksumOffset));
}

bool decodeTrailer(const std::byte* in, HandleTrailer* out) noexcept {
  const auto* base = reinterpret_cast<const unsigned char*>(in);
  if (get<uint32_t>(base, 0) != kTrailerMagic || get<uint16_t>(base, 4) != kTrailerVersion ||
      get<uint64_t>(base, kChecksumOffset) != checksum(base, kChecksumOffset)) {
    return false;
  }
  HandleTrailer t;
  t.listenNonce = get<uint64_t>(base, 8);
  t.pid = get<uint32_t>(base, 16);
  const auto family = get<uint16_t>(base, 6);
  if (family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&t.liveness);
    a->sin_family = AF_INET;
    a->sin_port = get<uint16_t>(base, 20);
    std::memcpy(&a->sin_addr, base + 24, 4);
  } else if (family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&t.liveness);
    a->sin6_family = AF_INET6;
    a->sin6_port = get<uint16_t>(base, 20);
    std::memcpy(&a->sin6_addr, base + 24, 16);
  } else if (family != AF_UNSPEC) {
    return false;
  }
  *out = t;
  return true;
}

bool writeTrailer(std::byte* handle, size_t innerBytes, const HandleTrailer& trailer) noexcept {
  if (innerBytes > kOffset && innerBytes < transport::kHandleSize) {
    return false;  // known to overlap
  }
  std::byte* base = handle + kOffset;
  for (size_t i = 0; i < kTrailerSize; ++i) {
    if (base[i] != std::byte{0}) {
      return false;  // the inner transport wrote here after all
    }
  }
  encodeTrailer(trailer, base);
  return true;
}

bool readTrailer(const std::byte* handle, size_t innerBytes, HandleTrailer* out) noexcept {
  if (innerBytes > kOffset && innerBytes < transport::kHandleSize) {
    return false;
  }
  return decodeTrailer(handle + kOffset, out);
}

}  // namespace resilient::net
