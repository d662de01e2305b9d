// Sizes on the command line, the size sweep, bus factors and table rows.
#include "hostengine/pattern.h"
#include "tools/harness/report.h"

namespace harness = resilient::harness;
namespace he = resilient::hostengine;

TEST_CASE("sizes parse with K/M/G suffixes", "[hostengine][sizes]") {
  struct Case {
    const char* text;
    size_t bytes;
  };
  const Case cases[] = {
      {"0", 0},
      {"8", 8},
      {"1K", 1024},
      {"64k", 65536},
      {"1M", 1u << 20},
      {"64M", 64u << 20},
      {"2G", size_t{2} << 30},
      {"1KB", 1024},
      {"1KiB", 1024},
      {"3MiB", 3u << 20},
      {"100B", 100},
      {"1T", size_t{1} << 40},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    auto r = harness::parseSize(c.text);
    REQUIRE(r.ok());
    CHECK(*r == c.bytes);
  }
}

TEST_CASE("bad sizes are refused with the accepted syntax", "[hostengine][sizes]") {
  for (const char* bad : {"", "K", "-1", "1.5M", "1X", "1MM", "1Ki", "1 M", "0x10", "2T",
                          "99999999999999999999", "1iB"}) {
    CAPTURE(bad);
    auto r = harness::parseSize(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().kind() == resilient::ErrorKind::kInvalidUsage);
    CHECK(r.status().message().find("K, M or G") != std::string::npos);
  }
}

TEST_CASE("the size sweep multiplies up to the maximum", "[hostengine][sizes]") {
  auto s = harness::sizeSweep(8, 64u << 20, 4);
  REQUIRE(s.ok());
  REQUIRE(s->size() == 12);
  CHECK(s->front() == 8);
  CHECK(s->back() == (32u << 20));  // 8 * 4^11; 64M is not reached exactly
  auto exact = harness::sizeSweep(1024, 8192, 2);
  REQUIRE(exact.ok());
  CHECK(*exact == std::vector<size_t>{1024, 2048, 4096, 8192});
  auto one = harness::sizeSweep(100, 100, 2);
  REQUIRE(one.ok());
  CHECK(*one == std::vector<size_t>{100});
  auto zero = harness::sizeSweep(0, 4, 2);
  REQUIRE(zero.ok());
  CHECK(*zero == std::vector<size_t>{0, 1, 2, 4});
  CHECK_FALSE(harness::sizeSweep(8, 4, 2).ok());
  CHECK_FALSE(harness::sizeSweep(8, 64, 1).ok());
  CHECK_FALSE(harness::sizeSweep(8, 64, 0).ok());
}

TEST_CASE("bus factors are nccl-tests'", "[hostengine][busfactor]") {
  CHECK(he::busFactor(he::Pattern::kAllReduce, 4) == Approx(1.5));
  CHECK(he::busFactor(he::Pattern::kAllReduce, 2) == Approx(1.0));
  CHECK(he::busFactor(he::Pattern::kAllReduce, 8) == Approx(1.75));
  CHECK(he::busFactor(he::Pattern::kAllToAll, 4) == Approx(0.75));
  CHECK(he::busFactor(he::Pattern::kAllToAll, 2) == Approx(0.5));
  CHECK(he::busFactor(he::Pattern::kSendRecv, 4) == Approx(1.0));
  CHECK(he::busFactor(he::Pattern::kPingPong, 2) == Approx(1.0));
}

TEST_CASE("sizes round to whole elements and blocks", "[hostengine][busfactor]") {
  CHECK(he::effectiveBytes(he::Pattern::kAllReduce, 4, 10) == 8);
  CHECK(he::elementCount(he::Pattern::kAllReduce, 4, 10) == 2);
  CHECK(he::effectiveBytes(he::Pattern::kAllToAll, 3, 100) == 99);
  CHECK(he::elementCount(he::Pattern::kAllToAll, 3, 100) == 99);
  CHECK(he::effectiveBytes(he::Pattern::kSendRecv, 3, 7) == 7);
  CHECK(std::string(he::elementType(he::Pattern::kAllReduce)) == "float");
}

TEST_CASE("a row has algbw = bytes / time and busbw = algbw * factor", "[hostengine][busfactor]") {
  const harness::SizeResult r = harness::makeSizeResult({.pattern = he::Pattern::kAllReduce,
                                                         .nranks = 4,
                                                         .bytes = 1u << 30,
                                                         .seconds = 0.5,
                                                         .errors = 3});
  CHECK(r.bytes == (1u << 30));
  CHECK(r.count == (1u << 28));
  CHECK(r.timeUs == Approx(500000));
  CHECK(r.algBw == Approx(2.147483648));
  CHECK(r.busBw == Approx(2.147483648 * 1.5));
  CHECK(r.errors == 3);
  const std::string row = harness::tableRow(he::Pattern::kAllReduce, r);
  CHECK(row.find("1073741824") != std::string::npos);
  CHECK(row.find("float") != std::string::npos);
  CHECK(harness::tableHeader(he::Pattern::kAllReduce).find("busbw") != std::string::npos);
  const harness::SizeResult untimed =
      harness::makeSizeResult({.pattern = he::Pattern::kSendRecv, .nranks = 2, .bytes = 8});
  CHECK(untimed.algBw == 0);
}

TEST_CASE("patterns parse by name", "[hostengine][busfactor]") {
  CHECK(he::parsePattern("allreduce") == he::Pattern::kAllReduce);
  CHECK(he::parsePattern("pingpong") == he::Pattern::kPingPong);
  CHECK(he::parsePattern("sendrecv") == he::Pattern::kSendRecv);
  CHECK(he::parsePattern("alltoall") == he::Pattern::kAllToAll);
  CHECK_FALSE(he::parsePattern("allgather").has_value());
}
