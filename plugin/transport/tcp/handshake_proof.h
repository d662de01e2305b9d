// What each side of the TCP handshake proves (common/job_auth.h) and over
// which bytes, written once for both sides: the listener proves over the
// hello and its challenge up to the proof; the connector over the hello and
// the whole challenge (the listener's proof included). The nonces are read
// from those bytes: the connector's from the hello, the listener's from the
// challenge.
//
// Threads: immutable after construction.
#pragma once

#include <cstdint>
#include <string_view>

#include "common/job_auth.h"

namespace resilient::transport::tcp {

class HandshakeSecret {
 public:
  explicit HandshakeSecret(std::string_view jobToken) : secret_(jobToken) {}

  // `hello`: kHelloBytes; `challenge`: its first kChallengeProofAt bytes.
  auth::Proof listenerProof(const uint8_t* hello, const uint8_t* challenge) const noexcept;
  // `challenge`: kChallengeBytes, the proof included.
  bool listenerProofHolds(const uint8_t* hello, const uint8_t* challenge) const noexcept;

  // `challenge`: kChallengeBytes.
  auth::Proof connectorProof(const uint8_t* hello, const uint8_t* challenge) const noexcept;
  bool connectorProofHolds(const uint8_t* hello, const uint8_t* challenge,
                           const auth::Proof& proof) const noexcept;

 private:
  auth::JobSecret secret_;
};

}  // namespace resilient::transport::tcp
