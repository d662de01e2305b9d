// Watching a process's end (pidfd, and the probing fallback) and signalling it.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

#include <catch2/catch.hpp>

#include "restart/monitor/rank_process.h"

namespace rm = resilient::restart::monitor;
using std::chrono::milliseconds;

namespace {

pid_t sleeper() {
  const pid_t pid = ::fork();
  if (pid == 0) {
    for (;;) {
      ::pause();
    }
  }
  REQUIRE(pid > 0);
  return pid;
}

}  // namespace

TEST_CASE("a process's end is seen, reaped or not", "[monitor][process]") {
  const auto watch = GENERATE(rm::RankProcess::Watch::kAuto, rm::RankProcess::Watch::kProbe);
  const pid_t pid = sleeper();
  rm::RankProcess p(pid, watch);
  if (watch == rm::RankProcess::Watch::kProbe) {
    CHECK_FALSE(p.usesPidfd());
  }
  CHECK_FALSE(p.ended());
  CHECK_FALSE(p.waitForEnd(milliseconds(20)));
  CHECK(p.signal(SIGKILL));
  // Not reaped yet: a zombie has ended.
  const auto start = std::chrono::steady_clock::now();
  CHECK(p.waitForEnd(milliseconds(2000)));
  CHECK(std::chrono::steady_clock::now() - start < milliseconds(500));
  CHECK(p.ended());
  CHECK_FALSE(p.signal(SIGTERM));
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WTERMSIG(status) == SIGKILL);
}

TEST_CASE("a process already gone has ended", "[monitor][process]") {
  const auto watch = GENERATE(rm::RankProcess::Watch::kAuto, rm::RankProcess::Watch::kProbe);
  const pid_t pid = sleeper();
  ::kill(pid, SIGKILL);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  rm::RankProcess p(pid, watch);
  CHECK(p.ended());
}
