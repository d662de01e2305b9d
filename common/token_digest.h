// The 64-bit digest of a job token that the wire protocols carry instead of
// the token (TCP transport handshake, liveness channel hello). Not a secret:
// it keeps the processes of different jobs from talking to each other.
#pragma once

#include <cstdint>
#include <string_view>

namespace resilient {

// 0 for the empty token ("no token") and never 0 otherwise.
uint64_t tokenDigest(std::string_view token) noexcept;

}  // namespace resilient
