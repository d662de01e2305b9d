#include <catch2/catch.hpp>

#include "common/token_digest.h"

using resilient::tokenDigest;

TEST_CASE("job token digests", "[digest]") {
  CHECK(tokenDigest("") == 0);
  CHECK(tokenDigest("a") != 0);
  CHECK(tokenDigest("a") != tokenDigest("b"));
  CHECK(tokenDigest("job-1") != tokenDigest("job-2"));
  CHECK(tokenDigest("same") == tokenDigest("same"));
  // The value travels in the TCP transport's hello: peers of another build
  // must compute the same one.
  CHECK(tokenDigest("job-42") == 0xb6f7e4ec0c071479ull);
}
