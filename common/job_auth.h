// Proof of the job token without revealing it: the mutual challenge-response
// of every wire protocol the plugins speak (the TCP transport's handshake,
// the liveness channel). Each side sends a fresh random nonce; each proves it
// holds the token with a keyed MAC (HMAC-SHA256, key: the token) over both
// nonces, its role and what it said in the handshake. Nothing on the wire is
// derived from the token alone, a proof is never valid twice (fresh nonces),
// and a proof of one role is never valid for the other (no reflection).
//
// The empty token is a key like any other: processes without a token accept
// only peers without one.
//
// Threads: JobSecret is immutable after construction; freshNonce() is
// thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace resilient::auth {

inline constexpr size_t kNonceBytes = 16;
inline constexpr size_t kProofBytes = 32;
using Nonce = std::array<uint8_t, kNonceBytes>;
using Proof = std::array<uint8_t, kProofBytes>;

// Who proves: the side that accepted the TCP connection or the one that
// opened it.
enum class Role : uint8_t { kListener = 1, kConnector = 2 };

// 16 bytes from the kernel's random source (getrandom).
Nonce freshNonce() noexcept;

class JobSecret {
 public:
  explicit JobSecret(std::string_view token) : token_(token) {}

  // HMAC-SHA256 over `protocol` (a label naming the protocol and its
  // version), `role`, both nonces and `transcript` (the bytes of the
  // handshake that the proof vouches for).
  Proof prove(std::string_view protocol, Role role, const Nonce& connectorNonce,
              const Nonce& listenerNonce, std::string_view transcript) const noexcept;
  // Whether `proof` (kProofBytes) is the proof of `role`; constant time.
  bool verify(std::string_view protocol, Role role, const Nonce& connectorNonce,
              const Nonce& listenerNonce, std::string_view transcript,
              const uint8_t* proof) const noexcept;

 private:
  std::string token_;
};

}  // namespace resilient::auth
