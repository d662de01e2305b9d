// Watching a process's end (pidfd, and the probing fallback), seeing it on
// its way out, and signalling it.
#include <signal.h>
#include <sys/ptrace.h>
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

// A SIGKILLed rank sat ~1 s in the kernel's teardown of its address space
// (behind a file's i_mmap lock that a CPU-starved kdamond held): no pidfd
// event, its sockets open, and its monitor called it dead only at the 1 s
// liveness timeout. Here a tracer holds the killed process at its exit
// (PTRACE_EVENT_EXIT: the kernel's exit path, nothing of its own code runs
// again), as long as the test needs.
TEST_CASE("a killed process whose teardown has not finished is exiting, not ended",
          "[monitor][process]") {
  const pid_t pid = sleeper();
  rm::RankProcess p(pid);
  CHECK_FALSE(rm::RankProcess::exiting(pid));
  // Frozen is not exiting.
  REQUIRE(::kill(pid, SIGSTOP) == 0);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, WUNTRACED) == pid);
  REQUIRE(WIFSTOPPED(status));
  CHECK_FALSE(rm::RankProcess::exiting(pid));
  REQUIRE(::kill(pid, SIGCONT) == 0);

  REQUIRE(::ptrace(PTRACE_SEIZE, pid, nullptr, PTRACE_O_TRACEEXIT) == 0);
  REQUIRE(::kill(pid, SIGKILL) == 0);
  do {
    REQUIRE(::waitpid(pid, &status, __WALL) == pid);
  } while (WIFSTOPPED(status) && (status >> 16) != PTRACE_EVENT_EXIT);
  REQUIRE(WIFSTOPPED(status));  // held in its exit
  CHECK(rm::RankProcess::exiting(pid));
  CHECK_FALSE(p.waitForEnd(milliseconds(50)));

  REQUIRE(::ptrace(PTRACE_DETACH, pid, nullptr, nullptr) == 0);
  CHECK(p.waitForEnd(milliseconds(2000)));
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WTERMSIG(status) == SIGKILL);
  CHECK_FALSE(rm::RankProcess::exiting(pid));  // gone: ended, not exiting
}
