#include <arpa/inet.h>
#include <netinet/in.h>

#include <array>
#include <cstring>

#include <catch2/catch.hpp>

#include "plugin/net/handle_trailer.h"
#include "plugin/transport/transport.h"

using namespace resilient::net;

namespace {

HandleTrailer ipv4Trailer() {
  HandleTrailer t;
  t.listenNonce = 0x1122334455667788ull;
  t.pid = 4242;
  auto* a = reinterpret_cast<sockaddr_in*>(&t.liveness);
  a->sin_family = AF_INET;
  a->sin_port = htons(40123);
  inet_pton(AF_INET, "10.1.2.3", &a->sin_addr);
  return t;
}

}  // namespace

TEST_CASE("the handle trailer round-trips after the inner handle", "[net][trailer]") {
  std::array<std::byte, resilient::transport::kHandleSize> handle{};
  std::memset(handle.data(), 0xab, 40);  // what an inner transport wrote
  REQUIRE(writeTrailer(handle.data(), 40, ipv4Trailer()));
  HandleTrailer back;
  REQUIRE(readTrailer(handle.data(), 40, &back));
  CHECK(back.listenNonce == 0x1122334455667788ull);
  CHECK(back.pid == 4242);
  const auto* a = reinterpret_cast<const sockaddr_in*>(&back.liveness);
  CHECK(a->sin_family == AF_INET);
  CHECK(ntohs(a->sin_port) == 40123);
  char text[INET_ADDRSTRLEN];
  CHECK(std::string(inet_ntop(AF_INET, &a->sin_addr, text, sizeof text)) == "10.1.2.3");
  CHECK(handle[39] == std::byte{0xab});  // the inner bytes are untouched
}

TEST_CASE("IPv6 liveness addresses fit too", "[net][trailer]") {
  std::array<std::byte, resilient::transport::kHandleSize> handle{};
  HandleTrailer t;
  t.listenNonce = 7;
  auto* a = reinterpret_cast<sockaddr_in6*>(&t.liveness);
  a->sin6_family = AF_INET6;
  a->sin6_port = htons(5);
  inet_pton(AF_INET6, "fd00::1234", &a->sin6_addr);
  REQUIRE(writeTrailer(handle.data(), 0, t));
  HandleTrailer back;
  REQUIRE(readTrailer(handle.data(), 0, &back));
  CHECK(std::memcmp(&reinterpret_cast<sockaddr_in6*>(&back.liveness)->sin6_addr, &a->sin6_addr,
                    16) == 0);
}

TEST_CASE("no trailer where the inner transport needs the room", "[net][trailer]") {
  std::array<std::byte, resilient::transport::kHandleSize> handle{};
  SECTION("declared to overlap") {
    CHECK_FALSE(writeTrailer(handle.data(), 100, ipv4Trailer()));
  }
  SECTION("size unknown (external plugin) but the bytes were left zero") {
    CHECK(writeTrailer(handle.data(), resilient::transport::kHandleSize, ipv4Trailer()));
    HandleTrailer back;
    CHECK(readTrailer(handle.data(), resilient::transport::kHandleSize, &back));
  }
  SECTION("size unknown and the bytes used") {
    handle[resilient::transport::kHandleSize - 5] = std::byte{7};
    CHECK_FALSE(writeTrailer(handle.data(), resilient::transport::kHandleSize, ipv4Trailer()));
  }
  SECTION("bytes written in the trailer's place") {
    handle[resilient::transport::kHandleSize - 1] = std::byte{1};
    CHECK_FALSE(writeTrailer(handle.data(), 16, ipv4Trailer()));
  }
}

TEST_CASE("a handle without a valid trailer is recognised", "[net][trailer]") {
  std::array<std::byte, resilient::transport::kHandleSize> handle{};
  HandleTrailer back;
  CHECK_FALSE(readTrailer(handle.data(), 16, &back));  // all zero
  REQUIRE(writeTrailer(handle.data(), 16, ipv4Trailer()));
  SECTION("any flipped byte fails the checksum") {
    for (size_t i = resilient::transport::kHandleSize - kTrailerSize; i < handle.size(); ++i) {
      CAPTURE(i);
      auto copy = handle;
      copy[i] ^= std::byte{0x40};
      CHECK_FALSE(readTrailer(copy.data(), 16, &back));
    }
  }
}
