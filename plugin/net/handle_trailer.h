// The resilient layer's part of NCCL's 128-byte listen handle: the last
// kTrailerSize bytes, after whatever the inner transport writes. It tells the
// connecting side where the listening process's liveness channel is and which
// listen comm it connects to, so that both ends of every connection know their
// peer process whatever the inner transport. When the inner transport leaves
// no room for it, the same bytes travel the other way, in band, as the first
// message of the connection (plugin/net/introduction.h).
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>

namespace resilient::net {

inline constexpr size_t kTrailerSize = 48;
inline constexpr uint32_t kTrailerMagic = 0x52534c54;  // "RSLT"
inline constexpr uint16_t kTrailerVersion = 1;

struct HandleTrailer {
  uint64_t listenNonce = 0;     // the key the peer binds to: a listen comm, or (in band) a
                                // connection, within its process
  uint32_t pid = 0;             // the process that wrote it
  sockaddr_storage liveness{};  // its liveness channel (AF_INET or AF_INET6); AF_UNSPEC: it
                                // has none
};

// The kTrailerSize bytes of a trailer, and back (false: not a trailer, or a
// corrupted one).
void encodeTrailer(const HandleTrailer& trailer, std::byte* out) noexcept;
bool decodeTrailer(const std::byte* in, HandleTrailer* out) noexcept;

// Writes the trailer after the inner transport's `innerBytes`; false (nothing
// written) when the inner transport leaves no room for it. A transport that
// cannot tell its size declares the whole handle (an external plugin): the
// trailer then goes in only if the inner listen left its bytes zero.
bool writeTrailer(std::byte* handle, size_t innerBytes, const HandleTrailer& trailer) noexcept;
// Reads it back; false when the handle carries none (or a corrupted one).
bool readTrailer(const std::byte* handle, size_t innerBytes, HandleTrailer* out) noexcept;

}  // namespace resilient::net
