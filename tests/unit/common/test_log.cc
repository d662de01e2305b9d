#include <unistd.h>

#include <cstdio>
#include <regex>
#include <string>

#include <catch2/catch.hpp>

#include "common/log.h"
#include "tests/support/mock_logger.h"
#include "tests/support/temp_dir.h"

using namespace resilient;
using resilient::log::Level;
using resilient::test::CapturingLogger;

namespace {

int gEvaluations = 0;
int countedArgument() {
  return ++gEvaluations;
}

// Runs `fn` with stderr redirected to a file and returns what it wrote.
template <class Fn>
std::string captureStderr(Fn fn) {
  test::TempDir dir;
  const std::string path = dir.write("stderr.txt", "");
  fflush(stderr);
  const int saved = dup(STDERR_FILENO);
  FILE* f = fopen(path.c_str(), "w");
  REQUIRE(f != nullptr);
  dup2(fileno(f), STDERR_FILENO);
  fn();
  fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  fclose(f);
  FILE* in = fopen(path.c_str(), "r");
  std::string out;
  char buf[512];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof buf, in)) > 0) {
    out.append(buf, n);
  }
  fclose(in);
  return out;
}

}  // namespace

TEST_CASE("filtered messages are not formatted", "[common][log]") {
  CapturingLogger logger(Level::kWarn);
  gEvaluations = 0;
  RES_INFO(NCCL_NET, "value %d", countedArgument());
  CHECK(gEvaluations == 0);
  RES_WARN(NCCL_NET, "value %d", countedArgument());
  CHECK(gEvaluations == 1);
  CHECK(logger.count(NCCL_LOG_WARN, "value 1") == 1);
  CHECK(logger.count(NCCL_LOG_INFO) == 0);
}

TEST_CASE("the subsystem mask filters INFO but never WARN", "[common][log]") {
  CapturingLogger logger(Level::kInfo, NCCL_INIT | NCCL_ENV);
  RES_INFO(NCCL_NET, "net info");
  RES_INFO(NCCL_INIT, "init info");
  RES_WARN(NCCL_NET, "net warn");
  const auto msgs = logger.messages();
  REQUIRE(msgs.size() == 2);
  CHECK(msgs[0].text.find("init info") != std::string::npos);
  CHECK(msgs[1].text.find("net warn") != std::string::npos);
}

TEST_CASE("NCCL's logger receives NCCL's conventions and our prefix", "[common][log]") {
  CapturingLogger logger(Level::kInfo);
  RES_WARN(NCCL_NET, "peer %s stalled for %d ms", "host-b:4000", 2100);
  RES_INFO(NCCL_PROFILE, "comm %#x registered", 0xabcu);
  RES_INFO(log::kStore, "barrier released");
  const auto msgs = logger.messages();
  REQUIRE(msgs.size() == 3);
  CHECK(msgs[0].level == NCCL_LOG_WARN);
  CHECK(msgs[0].flags == static_cast<unsigned long>(NCCL_ALL));
  CHECK(msgs[0].text == "NET/Resilient: peer host-b:4000 stalled for 2100 ms");
  CHECK(msgs[1].level == NCCL_LOG_INFO);
  CHECK(msgs[1].flags == NCCL_PROFILE);
  CHECK(msgs[1].text == "PROFILER/Resilient: comm 0xabc registered");
  CHECK(msgs[2].text == "STORE/Resilient: barrier released");
}

TEST_CASE("without NCCL's logger, lines go to stderr with time, host, pid and rank",
          "[common][log]") {
  const Level saved = log::level();
  log::configure(Level::kInfo, ~0ul);
  log::setRank(7);
  const std::string out = captureStderr([] { RES_WARN(NCCL_NET, "link down on %s", "eth1"); });
  log::setRank(-1);
  log::configure(saved, ~0ul);
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const std::regex line(
      R"(^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z (\S+):(\d+):(\d+) \[7\] RESILIENT WARN NET/Resilient: link down on eth1\n$)");
  std::smatch m;
  INFO(out);
  REQUIRE(std::regex_match(out, m, line));
  CHECK(m[1] == std::string(host));
  CHECK(std::stoi(m[2]) == getpid());
}

TEST_CASE("level and subsystem names parse like NCCL_DEBUG and NCCL_DEBUG_SUBSYS",
          "[common][log]") {
  CHECK(log::parseLevel("info") == Level::kInfo);
  CHECK(log::parseLevel("TRACE") == Level::kTrace);
  CHECK(log::parseLevel("none") == Level::kNone);
  CHECK_FALSE(log::parseLevel("verbose").has_value());
  CHECK_FALSE(log::parseLevel("").has_value());

  CHECK(log::parseSubsystems("NET") == static_cast<unsigned long>(NCCL_NET));
  CHECK(log::parseSubsystems("init,net,Store") == (NCCL_INIT | NCCL_NET | log::kStore));
  CHECK(log::parseSubsystems("^NET") == ~static_cast<unsigned long>(NCCL_NET));
  CHECK(log::parseSubsystems("ALL") == ~0ul);
  CHECK_FALSE(log::parseSubsystems("NET,BOGUS").has_value());
  CHECK_FALSE(log::parseSubsystems("").has_value());
  CHECK_FALSE(log::parseSubsystems("NET,").has_value());
}

TEST_CASE("the rate limiter lets one warning through per interval and counts the rest",
          "[common][log]") {
  CapturingLogger logger;
  log::setWarnIntervalMs(1000);
  log::RateLimiter limiter;
  constexpr uint64_t kMs = 1000000;
  uint64_t suppressed = 99;
  CHECK(limiter.allow(5 * kMs, &suppressed));
  CHECK(suppressed == 0);
  CHECK_FALSE(limiter.allow(500 * kMs, &suppressed));
  CHECK_FALSE(limiter.allow(1004 * kMs, &suppressed));
  CHECK(limiter.allow(1005 * kMs, &suppressed));
  CHECK(suppressed == 2);

  log::RateLimiter other;
  for (uint64_t t = 0; t < 5; ++t) {
    RES_WARN_LIMITED(other, (3000 + t * 100) * kMs, NCCL_NET, "stall on conn %d", 3);
  }
  RES_WARN_LIMITED(other, 4000 * kMs, NCCL_NET, "stall on conn %d", 3);
  const auto msgs = logger.messages();
  REQUIRE(msgs.size() == 2);
  CHECK(msgs[0].text == "NET/Resilient: stall on conn 3");
  CHECK(msgs[1].text == "NET/Resilient: stall on conn 3 (4 similar messages suppressed)");
  log::setWarnIntervalMs(10000);
}

TEST_CASE("interval 0 disables rate limiting", "[common][log]") {
  log::setWarnIntervalMs(0);
  log::RateLimiter limiter;
  uint64_t suppressed = 0;
  CHECK(limiter.allow(1, &suppressed));
  CHECK(limiter.allow(1, &suppressed));
  CHECK(limiter.allow(2, &suppressed));
  CHECK(suppressed == 0);
  log::setWarnIntervalMs(10000);
}
