#include "store/tcp/hello_check.h"

#include <algorithm>
#include <random>

#include "common/clock.h"

namespace resilient::store::tcp {

namespace {

// Compares without an early exit, so the time taken does not reveal how much
// of the token matched.
bool tokensEqual(const std::string& a, const std::string& b) {
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned>(x ^ y);
  }
  return diff == 0;
}

}  // namespace

uint64_t randomInstanceId() {
  std::random_device rd;
  const uint64_t hi = rd();
  const uint64_t lo = rd();
  return ((hi << 32) ^ lo ^ monotonicNs()) | 1;
}

HelloStatus checkHello(const Hello& hello, const std::string& token) {
  if (hello.version != kVersion) {
    return HelloStatus::kVersionUnsupported;
  }
  if (!token.empty() && !tokensEqual(hello.token, token)) {
    return HelloStatus::kTokenRefused;
  }
  return HelloStatus::kOk;
}

}  // namespace resilient::store::tcp
