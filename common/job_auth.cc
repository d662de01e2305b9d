#include "common/job_auth.h"

#include <nettle/hmac.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace resilient::auth {
namespace {

void update(hmac_sha256_ctx* ctx, std::string_view bytes) {
  // Length first: the concatenation of the fields is unambiguous.
  const uint32_t n = static_cast<uint32_t>(bytes.size());
  uint8_t len[4] = {static_cast<uint8_t>(n), static_cast<uint8_t>(n >> 8),
                    static_cast<uint8_t>(n >> 16), static_cast<uint8_t>(n >> 24)};
  hmac_sha256_update(ctx, sizeof len, len);
  hmac_sha256_update(ctx, bytes.size(), reinterpret_cast<const uint8_t*>(bytes.data()));
}

std::string_view view(const Nonce& n) {
  return {reinterpret_cast<const char*>(n.data()), n.size()};
}

}  // namespace

Nonce freshNonce() noexcept {
  Nonce n{};
  size_t done = 0;
  while (done < n.size()) {
    const ssize_t got = ::getrandom(n.data() + done, n.size() - done, 0);
    if (got > 0) {
      done += static_cast<size_t>(got);
    } else if (got < 0 && errno != EINTR) {
      break;
    }
  }
  if (done < n.size()) {
    // No kernel randomness (a seccomp filter): unique, if not unpredictable.
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    const uint64_t mix[2] = {static_cast<uint64_t>(ts.tv_nsec) ^ (static_cast<uint64_t>(getpid()) << 32),
                             static_cast<uint64_t>(ts.tv_sec) ^ reinterpret_cast<uintptr_t>(&n)};
    std::memcpy(n.data(), mix, sizeof mix);
  }
  return n;
}

Proof JobSecret::prove(std::string_view protocol, Role role, const Nonce& connectorNonce,
                       const Nonce& listenerNonce, std::string_view transcript) const noexcept {
  hmac_sha256_ctx ctx;
  hmac_sha256_set_key(&ctx, token_.size(), reinterpret_cast<const uint8_t*>(token_.data()));
  update(&ctx, protocol);
  const char r = static_cast<char>(role);
  update(&ctx, std::string_view(&r, 1));
  update(&ctx, view(connectorNonce));
  update(&ctx, view(listenerNonce));
  update(&ctx, transcript);
  Proof out{};
  hmac_sha256_digest(&ctx, out.size(), out.data());
  return out;
}

bool JobSecret::verify(std::string_view protocol, Role role, const Nonce& connectorNonce,
                       const Nonce& listenerNonce, std::string_view transcript,
                       const uint8_t* proof) const noexcept {
  const Proof expected = prove(protocol, role, connectorNonce, listenerNonce, transcript);
  uint8_t diff = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    diff |= static_cast<uint8_t>(expected[i] ^ proof[i]);
  }
  return diff == 0;
}

}  // namespace resilient::auth
