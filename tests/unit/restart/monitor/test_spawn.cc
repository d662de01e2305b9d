// Spawning the monitor: config and executable errors, and a stand-in
// monitor (a shell script) that reports what it inherited.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <catch2/catch.hpp>

#include "resilient/restart/errors.hpp"
#include "restart/monitor/monitor_executable.h"
#include "restart/monitor/spawn.h"
#include "restart/protocol/status_page.h"
#include "tests/support/temp_dir.h"

namespace rm = resilient::restart::monitor;
namespace rr = resilient::restart;
using std::chrono::milliseconds;

namespace {

rm::MonitorConfig config(int statusFd) {
  rm::MonitorConfig c;
  c.statusFd = statusFd;
  c.storeUrl = "memory";
  c.jobId = "job";
  c.rank = 3;
  c.worldSize = 4;
  return c;
}

std::string script(const resilient::test::TempDir& dir, const std::string& body) {
  const std::string path = dir.write("fake-monitor", "#!/bin/sh\n" + body);
  ::chmod(path.c_str(), 0755);
  return path;
}

// The file's content once it holds a line "end"; "" after the deadline.
std::string waitForReport(const std::string& path) {
  const auto deadline = std::chrono::steady_clock::now() + milliseconds(5000);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    if (s.str().find("end\n") != std::string::npos) {
      return s.str();
    }
    std::this_thread::sleep_for(milliseconds(5));  // the script has no other way to tell us
  }
  return "";
}

}  // namespace

TEST_CASE("a config that breaks a rule is a ConfigError", "[monitor][spawn]") {
  auto page = resilient::restart::protocol::StatusPageMapping::create(3);
  auto c = config(page.fd());
  c.softTimeout = c.hardTimeout;
  CHECK_THROWS_AS(rm::spawnMonitor(c, "/bin/true"), rr::ConfigError);
  CHECK_THROWS_WITH(rm::spawnMonitor(c, "/bin/true"),
                    Catch::Contains("must be less than the hard timeout"));
}

TEST_CASE("a closed status descriptor and a missing executable are named", "[monitor][spawn]") {
  CHECK_THROWS_WITH(rm::spawnMonitor(config(1000), "/bin/true"),
                    Catch::Contains("descriptor 1000 is not open"));
  auto page = resilient::restart::protocol::StatusPageMapping::create(3);
  CHECK_THROWS_WITH(rm::spawnMonitor(config(page.fd()), "/nonexistent/resilient-monitor"),
                    Catch::Contains("/nonexistent/resilient-monitor is missing"));
  CHECK_THROWS_WITH(rm::findMonitorExecutable("no-such-monitor-here"),
                    Catch::Contains("is not on PATH"));
  CHECK(rm::findMonitorExecutable("sh").find("/sh") != std::string::npos);
}

TEST_CASE("an exec failure is reported by the spawning call", "[monitor][spawn]") {
  resilient::test::TempDir dir;
  const std::string path = dir.write("bad-interpreter", "#!/nonexistent/interpreter\n");
  ::chmod(path.c_str(), 0755);
  auto page = resilient::restart::protocol::StatusPageMapping::create(3);
  CHECK_THROWS_WITH(rm::spawnMonitor(config(page.fd()), path),
                    Catch::Contains("exec of " + path + " failed"));
}

TEST_CASE("the monitor is a daemon with the status page and nothing else", "[monitor][spawn]") {
  resilient::test::TempDir dir;
  const std::string report = (dir.path() / "report").string();
  const std::string exe = script(dir,
                                 "{ echo \"args $*\"; echo \"ppid $PPID\"; "
                                 "echo \"sid $(cut -d' ' -f6 /proc/$$/stat)\"; "
                                 "echo \"fds $(ls /proc/$$/fd | tr '\\n' ' ')\"; echo end; } > " +
                                     report + ".tmp; mv " + report + ".tmp " + report + "\n");
  auto page = resilient::restart::protocol::StatusPageMapping::create(3);
  // A descriptor the rank holds open (inheritable) must not reach the monitor.
  // (numbered high: the shell's own descriptors are low ones)
  const int low = ::open("/dev/null", O_RDONLY);
  REQUIRE(low >= 0);
  const int decoy = ::fcntl(low, F_DUPFD, 200);
  ::close(low);
  REQUIRE(decoy >= 200);
  auto c = config(page.fd());
  c.logFile = (dir.path() / "monitor-{rank}.log").string();
  const pid_t pid = rm::spawnMonitor(c, exe);
  ::close(decoy);
  CHECK(pid > 0);
  const std::string text = waitForReport(report);
  REQUIRE_FALSE(text.empty());
  INFO(text);
  CHECK(text.find("--status-fd " + std::to_string(page.fd())) != std::string::npos);
  CHECK(text.find("--rank 3 --world-size 4") != std::string::npos);
  CHECK(text.find("--log-file " + (dir.path() / "monitor-3.log").string()) != std::string::npos);
  CHECK(text.find("ppid " + std::to_string(::getpid()) + "\n") == std::string::npos);
  CHECK(text.find("sid " + std::to_string(::getsid(0)) + "\n") == std::string::npos);
  const std::string fds = text.substr(text.find("fds "));
  CHECK(fds.find(" " + std::to_string(page.fd()) + " ") != std::string::npos);
  CHECK(fds.find(" " + std::to_string(decoy) + " ") == std::string::npos);
}
