// MonitorConfig's ordering rules, the command line and its round trip.
#include <algorithm>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "restart/monitor/command_line.h"
#include "restart/monitor/monitor_config.h"

namespace rm = resilient::restart::monitor;
using rm::Millis;

namespace {

rm::MonitorConfig valid() {
  rm::MonitorConfig c;
  c.statusFd = 5;
  c.storeUrl = "tcp://127.0.0.1:1234";
  c.jobId = "job";
  c.rank = 1;
  c.worldSize = 4;
  return c;  // the reference defaults for the durations
}

std::string errorOf(const rm::MonitorConfig& c) {
  try {
    c.validate();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

rm::MonitorConfig parse(const std::vector<std::string>& args) {
  std::vector<const char*> argv = {"resilient-monitor"};
  for (const auto& a : args) {
    argv.push_back(a.c_str());
  }
  return rm::parseCommandLine(static_cast<int>(argv.size()), argv.data());
}

}  // namespace

TEST_CASE("the reference defaults validate", "[monitor][config]") {
  CHECK(errorOf(valid()).empty());
}

TEST_CASE("each ordering rule is named when broken", "[monitor][config]") {
  auto c = valid();
  SECTION("soft < hard") {
    c.softTimeout = Millis(90000);
    CHECK(errorOf(c) ==
          "the soft timeout (90000 ms) must be less than the hard timeout (90000 ms)");
  }
  SECTION("hard < barrier") {
    c.hardTimeout = Millis(130000);
    CHECK(errorOf(c) ==
          "the hard timeout (130000 ms) must be less than the barrier timeout (120000 ms)");
  }
  SECTION("interval < heartbeat timeout") {
    c.interval = Millis(30000);
    CHECK(errorOf(c) ==
          "the monitor interval (30000 ms) must be less than the heartbeat timeout (30000 ms)");
  }
  SECTION("interval < soft timeout") {
    c.softTimeout = Millis(500);
    c.heartbeatTimeout = Millis(2000);
    c.interval = Millis(600);
    CHECK(errorOf(c) ==
          "the monitor interval (600 ms) must be less than the soft timeout (500 ms)");
  }
  SECTION("heartbeat interval < heartbeat timeout") {
    c.heartbeatInterval = Millis(30000);
    CHECK(errorOf(c) ==
          "the heartbeat interval (30000 ms) must be less than the heartbeat "
          "timeout (30000 ms)");
  }
  SECTION("heartbeat timeout < barrier timeout") {
    c.heartbeatTimeout = Millis(120000);
    c.interval = Millis(100);
    CHECK(errorOf(c).find("the heartbeat timeout (120000 ms) must be less than the barrier "
                          "timeout") != std::string::npos);
  }
  SECTION("positive durations") {
    c.grace = Millis(0);
    CHECK(errorOf(c) == "--grace-ms must be positive (got 0 ms)");
  }
  SECTION("a rank") {
    c.rank = -1;
    CHECK(errorOf(c) == "--rank must be 0 or more (got -1)");
    c.rank = 4;  // a process that joined a job of 4
    CHECK(errorOf(c).empty());
  }
  SECTION("job id") {
    c.jobId = "a/b";
    CHECK(errorOf(c).find("--job") != std::string::npos);
  }
}

TEST_CASE("arguments() parse back to the same config", "[monitor][config]") {
  auto c = valid();
  c.interval = Millis(20);
  c.heartbeatInterval = Millis(30);
  c.heartbeatTimeout = Millis(200);
  c.softTimeout = Millis(300);
  c.hardTimeout = Millis(400);
  c.barrierTimeout = Millis(1000);
  c.grace = Millis(50);
  c.storeTimeout = Millis(700);
  c.logFile = "/tmp/m-{rank}.log";
  c.pidFile = "/tmp/m-{rank}.pid";
  c.blackboxDir = "/dev/shm";
  const rm::MonitorConfig back = parse(c.arguments());
  CHECK(back.statusFd == 5);
  CHECK(back.storeUrl == c.storeUrl);
  CHECK(back.jobId == "job");
  CHECK(back.rank == 1);
  CHECK(back.worldSize == 4);
  CHECK(back.interval == Millis(20));
  CHECK(back.heartbeatInterval == Millis(30));
  CHECK(back.heartbeatTimeout == Millis(200));
  CHECK(back.softTimeout == Millis(300));
  CHECK(back.hardTimeout == Millis(400));
  CHECK(back.barrierTimeout == Millis(1000));
  CHECK(back.grace == Millis(50));
  CHECK(back.storeTimeout == Millis(700));
  CHECK(back.logFile == "/tmp/m-1.log");  // {rank} expanded
  CHECK(back.pidFile == "/tmp/m-1.pid");
  CHECK(back.blackboxDir == "/dev/shm");
}

TEST_CASE("bad command lines are refused with a clear message", "[monitor][config]") {
  auto args = valid().arguments();
  auto refused = [](const std::vector<std::string>& a) -> std::string {
    try {
      parse(a);
    } catch (const rm::CommandLineExit& e) {
      CHECK(e.exitCode() == rm::kBadArgumentsExit);
      return e.what();
    }
    return "";
  };
  SECTION("a missing option") {
    args.erase(args.begin(), args.begin() + 2);  // --status-fd N
    CHECK(refused(args).find("--status-fd") != std::string::npos);
  }
  SECTION("not a number") {
    args[1] = "five";
    CHECK(refused(args).find("--status-fd") != std::string::npos);
  }
  SECTION("an unknown option") {
    args.push_back("--bogus");
    CHECK(refused(args).find("--bogus") != std::string::npos);
  }
  SECTION("a broken rule") {
    const auto at = std::find(args.begin(), args.end(), "--soft-timeout-ms");
    REQUIRE(at != args.end());
    *(at + 1) = "100000";
    CHECK(refused(args).find("must be less than the hard timeout") != std::string::npos);
  }
  SECTION("--help") {
    try {
      parse({"--help"});
      FAIL("no help");
    } catch (const rm::CommandLineExit& e) {
      CHECK(e.exitCode() == 0);
      CHECK(std::string(e.what()).find("--heartbeat-timeout-ms") != std::string::npos);
    }
  }
}

TEST_CASE("{rank} is replaced everywhere in a path", "[monitor][config]") {
  CHECK(rm::expandRankPlaceholder("/a/{rank}/m-{rank}.log", 7) == "/a/7/m-7.log");
  CHECK(rm::expandRankPlaceholder("/a/b", 7) == "/a/b");
  CHECK(rm::expandRankPlaceholder("", 7).empty());
}
