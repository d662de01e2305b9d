#include "plugin/transport/tcp/handshake_proof.h"

#include <array>
#include <cstring>

#include "plugin/transport/tcp/wire.h"

namespace resilient::transport::tcp {
namespace {

// Names the protocol and its version: a proof of another protocol or version
// is never valid here.
constexpr std::string_view kLabel = "nccl-resilient tcp handshake v2";
static_assert(kProtocolVersion == 2, "the label names the protocol version");

// The hello followed by the first `challengeBytes` of the challenge.
class Transcript {
 public:
  Transcript(const uint8_t* hello, const uint8_t* challenge, size_t challengeBytes) noexcept
      : size_(kHelloBytes + challengeBytes) {
    std::memcpy(bytes_.data(), hello, kHelloBytes);
    std::memcpy(bytes_.data() + kHelloBytes, challenge, challengeBytes);
  }
  std::string_view view() const noexcept {
    return {reinterpret_cast<const char*>(bytes_.data()), size_};
  }

 private:
  std::array<uint8_t, kHelloBytes + kChallengeBytes> bytes_{};
  size_t size_;
};

}  // namespace

auth::Proof HandshakeSecret::listenerProof(const uint8_t* hello,
                                           const uint8_t* challenge) const noexcept {
  return secret_.prove(kLabel, auth::Role::kListener, helloAuthNonce(hello),
                       challengeNonce(challenge),
                       Transcript(hello, challenge, kChallengeProofAt).view());
}

bool HandshakeSecret::listenerProofHolds(const uint8_t* hello,
                                         const uint8_t* challenge) const noexcept {
  return secret_.verify(
      kLabel, auth::Role::kListener, helloAuthNonce(hello), challengeNonce(challenge),
      Transcript(hello, challenge, kChallengeProofAt).view(), challenge + kChallengeProofAt);
}

auth::Proof HandshakeSecret::connectorProof(const uint8_t* hello,
                                            const uint8_t* challenge) const noexcept {
  return secret_.prove(kLabel, auth::Role::kConnector, helloAuthNonce(hello),
                       challengeNonce(challenge),
                       Transcript(hello, challenge, kChallengeBytes).view());
}

bool HandshakeSecret::connectorProofHolds(const uint8_t* hello, const uint8_t* challenge,
                                          const auth::Proof& proof) const noexcept {
  return secret_.verify(kLabel, auth::Role::kConnector, helloAuthNonce(hello),
                        challengeNonce(challenge),
                        Transcript(hello, challenge, kChallengeBytes).view(), proof.data());
}

}  // namespace resilient::transport::tcp
