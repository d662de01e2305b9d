// The monitor process end to end: fake ranks (fake_rank.cc) that start
// their monitor through spawn.h against a TCP store served by this test.
// This process is a child subreaper, so the double-forked monitors become
// its children and their exit codes are checked. Every wait is on a store
// key or a process, with a deadline. Latency bounds are the feature plus a
// margin (kSlackMs) for a loaded machine.
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "restart/protocol/fault_record.h"
#include "restart/protocol/job_keys.h"
#include "store/errors.h"
#include "store/tcp/client.h"
#include "store/tcp/server.h"
#include "tests/support/loopback_socket.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/store/store_test_util.h"

namespace rp = resilient::restart::protocol;
namespace st = resilient::store;
using resilient::test::ChildProcess;
using resilient::test::TempDir;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int64_t kSlackMs = 1000;

std::string envOr(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : fallback;
}

std::string monitorBinary() {
  return envOr("RESILIENT_MONITOR_BIN", "resilient-monitor");
}

std::string fakeRankBinary() {
  return envOr("RESILIENT_FAKE_RANK_BIN", "fake-rank");
}

int64_t msSince(Clock::time_point t) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - t).count();
}

// Exit code of a process that is (or will become) our child; -1 at the deadline.
int waitExit(pid_t pid, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (r < 0 && errno != ECHILD) {
      return -2;
    }
    if (Clock::now() >= deadline) {
      return -1;
    }
    ::usleep(2000);  // a zombie appears when the process ends; nothing else to wait on
  }
}

bool processRunning(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) {
    return false;
  }
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z' &&
         line[close + 2] != 'X';
}

struct FakeRank {
  std::unique_ptr<ChildProcess> process;
  pid_t pid = -1;
  pid_t monitorPid = -1;
};

class Job {
 public:
  explicit Job(std::string id) : id_(std::move(id)), keys_(id_) {
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
    serve(0);
    url_ = "tcp://127.0.0.1:" + std::to_string(server_->port());
  }

  // Monitors a failed check left behind are killed and reaped.
  ~Job() {
    for (const pid_t m : monitors_) {
      if (waitExit(m, milliseconds(0)) == -1) {
        ::kill(m, SIGKILL);
        waitExit(m, milliseconds(2000));
      }
    }
  }

  // Starts a fake rank; `extra` are fake-rank options (behaviour, timeouts);
  // its monitor uses `storeUrl`, this job's store when empty.
  FakeRank start(int rank, int worldSize, const std::vector<std::string>& extra,
                 const std::string& storeUrl = "") {
    std::vector<std::string> argv = {fakeRankBinary(),
                                     "--monitor",
                                     monitorBinary(),
                                     "--store",
                                     storeUrl.empty() ? url_ : storeUrl,
                                     "--job",
                                     id_,
                                     "--rank",
                                     std::to_string(rank),
                                     "--world-size",
                                     std::to_string(worldSize),
                                     "--log-file",
                                     (dir_.path() / "monitor-{rank}.log").string(),
                                     "--blackbox-dir",
                                     dir_.path().string()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    FakeRank f;
    f.process = std::make_unique<ChildProcess>(argv);
    const std::string line = f.process->readLine(milliseconds(10000));
    std::istringstream in(line);
    std::string word;
    in >> word >> f.pid >> f.monitorPid;
    INFO("fake rank said: " << line);
    REQUIRE(word == "ready");
    REQUIRE(f.monitorPid > 0);
    monitors_.push_back(f.monitorPid);
    return f;
  }

  st::Store& store() { return *client_; }
  const rp::JobKeys& keys() const { return keys_; }
  const std::filesystem::path& dir() const { return dir_.path(); }
  std::string log(int rank) const {
    std::ifstream in(dir_.path() / ("monitor-" + std::to_string(rank) + ".log"));
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  std::vector<rp::FaultRecord> faults() {
    std::vector<rp::FaultRecord> out;
    const auto count = client_->get(keys_.faultCount());
    const int64_t n = count ? std::stoll(*count) : 0;
    for (int64_t i = 1; i <= n; ++i) {
      out.push_back(
          rp::FaultRecord::fromJson(client_->waitGet(keys_.fault(i), milliseconds(2000))));
    }
    return out;
  }
  // True when `rank` is already counted at generation `iteration` of the iteration barrier.
  bool countedAtBarrier(int rank, int iteration, int worldSize) {
    st::BarrierArrival a;
    a.name = keys_.iterationBarrier();
    a.generation = static_cast<uint64_t>(iteration);
    a.rank = rank;
    a.worldSize = worldSize;
    a.waitForRelease = false;
    return client_->barrier(a, milliseconds(2000)).arrivalIndex == 0;
  }
  void stopServer() { server_->stop(); }
  // A new instance on the same port, its state empty (an agent serving the
  // job's store again).
  void restartServer() {
    const uint16_t port = server_->port();
    server_.reset();
    serve(port);
  }

 private:
  // The job's store on loopback at `port` (0: any), and this test's client.
  void serve(uint16_t port) {
    st::tcp::ServerOptions o;
    o.host = "127.0.0.1";
    o.port = port;
    server_ = std::make_unique<st::tcp::StoreServer>(o);
    client_ = std::make_unique<st::tcp::TcpStoreClient>("127.0.0.1", server_->port(),
                                                        resilient::test::testClientOptions());
  }

  TempDir dir_;
  std::string id_;
  rp::JobKeys keys_;
  std::unique_ptr<st::tcp::StoreServer> server_;
  std::string url_;
  std::unique_ptr<st::tcp::TcpStoreClient> client_;
  std::vector<pid_t> monitors_;
};

}  // namespace

TEST_CASE("a killed rank is recorded by its monitor within the interval", "[monitor][death]") {
  Job job("death");
  FakeRank r = job.start(0, 2, {"--behaviour", "ping", "--iteration", "3"});
  FakeRank partner = job.start(1, 2, {"--behaviour", "ping", "--iteration", "3"});
  // The heartbeats show up: the monitors run.
  job.store().wait({job.keys().heartbeat(0), job.keys().heartbeat(1)}, milliseconds(3000));

  const auto killed = Clock::now();
  r.process->kill(SIGKILL);
  job.store().wait({job.keys().interrupted(3)}, milliseconds(3000));
  const int64_t latency = msSince(killed);
  // 100 ms interval: the pidfd wakes the monitor at once; the bound is the feature.
  CHECK(latency < 500);
  WARN("death recorded " << latency << " ms after SIGKILL");

  const auto faults = job.faults();
  REQUIRE(faults.size() == 1);
  CHECK(faults[0].reason == rp::FaultReason::kTerminated);
  CHECK(faults[0].iteration == 3);
  CHECK(faults[0].subject == 0);
  CHECK(faults[0].culprit == 0);
  CHECK(faults[0].reporter == 0);
  CHECK(*job.store().get(job.keys().terminated(0)) == "terminated");
  CHECK(waitExit(r.monitorPid, milliseconds(3000)) == 0);
  CHECK(job.countedAtBarrier(0, 3, 2));
  CHECK_FALSE(job.store().exists(job.keys().heartbeat(0)));
  const std::string log = job.log(0);
  CHECK(log.find("post-mortem dump") != std::string::npos);
  bool dumped = false;
  for (const auto& e : std::filesystem::directory_iterator(job.dir())) {
    dumped |= e.path().string().find(".postmortem.json") != std::string::npos;
  }
  CHECK(dumped);
  partner.process->kill(SIGKILL);
  CHECK(waitExit(partner.monitorPid, milliseconds(3000)) == 0);
}

// A SIGKILLed rank of a 64-rank benchmark sat ~1 s in the kernel's teardown
// of its address space (a file's i_mmap lock held by a CPU-starved kdamond):
// no pidfd event, its sockets open, and its monitor found it only at the
// liveness timeout, "unresponsive", and killed it again. Here the test holds
// the killed rank in its exit (ptrace, PTRACE_EVENT_EXIT).
TEST_CASE("a killed rank still being torn down is recorded before its liveness timeout",
          "[monitor][death]") {
  Job job("exiting");
  // A 2 s liveness timeout (the monitor pings every 500 ms), the progress
  // timeouts far beyond it.
  const std::vector<std::string> opts = {
      "--behaviour",       "ping",  "--iteration",          "2",    "--soft-timeout-ms", "10000",
      "--hard-timeout-ms", "20000", "--barrier-timeout-ms", "30000"};
  std::vector<std::string> watched = opts;
  watched.insert(watched.end(), {"--liveness-ms", "2000"});
  FakeRank r = job.start(0, 2, watched);
  FakeRank partner = job.start(1, 2, opts);
  job.store().wait({job.keys().heartbeat(0), job.keys().heartbeat(1)}, milliseconds(3000));

  REQUIRE(::ptrace(PTRACE_SEIZE, r.pid, nullptr, PTRACE_O_TRACEEXIT) == 0);
  const auto killed = Clock::now();
  REQUIRE(::kill(r.pid, SIGKILL) == 0);
  int status = 0;
  do {
    REQUIRE(::waitpid(r.pid, &status, __WALL) == r.pid);
  } while (WIFSTOPPED(status) && (status >> 16) != PTRACE_EVENT_EXIT);
  REQUIRE(WIFSTOPPED(status));  // held in its exit until the detach below
  job.store().wait({job.keys().interrupted(2)}, milliseconds(5000));
  const int64_t latency = msSince(killed);
  CHECK(latency < 2000);  // before the liveness timeout: the bound is the feature
  WARN("death of a rank held in its exit recorded " << latency << " ms after SIGKILL");
  CHECK(processRunning(r.pid));  // still held: recorded before its end
  const auto faults = job.faults();
  REQUIRE(faults.size() == 1);
  INFO(faults[0].describe());
  CHECK(faults[0].reason == rp::FaultReason::kTerminated);
  CHECK(faults[0].culprit == 0);
  CHECK(faults[0].detail.find("on its way out") != std::string::npos);
  CHECK(*job.store().get(job.keys().terminated(0)) == "terminated");
  CHECK(waitExit(r.monitorPid, milliseconds(3000)) == 0);

  REQUIRE(::ptrace(PTRACE_DETACH, r.pid, nullptr, nullptr) == 0);
  CHECK(r.process->wait(milliseconds(3000)) == 128 + SIGKILL);
  partner.process->kill(SIGKILL);
  CHECK(waitExit(partner.monitorPid, milliseconds(3000)) == 0);
}

TEST_CASE("a rank that exits while running is recorded", "[monitor][death]") {
  Job job("exit");
  FakeRank partner = job.start(0, 2, {"--behaviour", "ping"});
  FakeRank r = job.start(1, 2, {"--behaviour", "exit", "--for-ms", "100"});
  CHECK(r.process->wait(milliseconds(3000)) == 3);
  // interrupted is written last (after terminated and the record).
  job.store().wait({job.keys().interrupted(0)}, milliseconds(2000));
  const auto faults = job.faults();
  REQUIRE(faults.size() == 1);
  CHECK(faults[0].reason == rp::FaultReason::kTerminated);
  CHECK(faults[0].subject == 1);
  CHECK(waitExit(r.monitorPid, milliseconds(3000)) == 0);
  partner.process->kill(SIGKILL);
  CHECK(waitExit(partner.monitorPid, milliseconds(3000)) == 0);
}

// Issue 34 (the store killed 5 ms after a SIGKILL): the dead rank's mark
// was lost with the old instance; the others' barriers and restart took it
// for alive until its heartbeat was missed (5 s), then named live ranks that
// had waited as culprits. Its monitor now marks it again.
TEST_CASE("a dead rank's terminated mark lost with a restarted store is marked again",
          "[monitor][death]") {
  Job job("mark-again");
  const std::vector<std::string> slow = {"--heartbeat-timeout-ms", "4000"};
  std::vector<std::string> pinging = {"--behaviour", "ping"};
  pinging.insert(pinging.end(), slow.begin(), slow.end());
  std::vector<std::string> exiting = {"--behaviour", "exit", "--for-ms", "100"};
  exiting.insert(exiting.end(), slow.begin(), slow.end());
  FakeRank partner = job.start(0, 2, pinging);
  FakeRank r = job.start(1, 2, exiting);
  CHECK(r.process->wait(milliseconds(3000)) == 3);
  job.store().wait({job.keys().interrupted(0)}, milliseconds(2000));
  job.restartServer();
  CHECK_FALSE(job.store().exists(job.keys().terminated(1)));  // lost with the old instance
  job.store().wait({job.keys().terminated(1)}, milliseconds(3000));
  // Only the mark: no second record, no barrier arrival, no interruption.
  CHECK_FALSE(job.store().exists(job.keys().faultCount()));
  CHECK_FALSE(job.store().exists(job.keys().interrupted(0)));
  CHECK(waitExit(r.monitorPid, milliseconds(8000)) == 0);
  INFO(job.log(1));
  CHECK(job.log(1).find("marked again") != std::string::npos);
  partner.process->kill(SIGKILL);
  CHECK(waitExit(partner.monitorPid, milliseconds(8000)) == 0);
}

TEST_CASE("the soft timeout is recorded once, without killing the rank", "[monitor][soft]") {
  Job job("soft");
  FakeRank r = job.start(0, 1,
                         {"--behaviour", "silent", "--iteration", "2", "--soft-timeout-ms", "300",
                          "--hard-timeout-ms", "8000", "--barrier-timeout-ms", "9000"});
  const auto started = Clock::now();
  job.store().wait({job.keys().interrupted(2)}, milliseconds(3000));
  const int64_t latency = msSince(started);
  CHECK(latency >= 250);  // not before the soft timeout (the rank's phase changed at start)
  CHECK(latency < 300 + 100 + kSlackMs);  // soft timeout + interval + bound
  auto faults = job.faults();
  REQUIRE(faults.size() == 1);
  CHECK(faults[0].reason == rp::FaultReason::kSoftTimeout);
  CHECK(faults[0].culprit == 0);
  CHECK(faults[0].iteration == 2);
  CHECK(*job.store().get(job.keys().interrupted(2)) == "soft-timeout");
  CHECK_FALSE(job.store().exists(job.keys().terminated(0)));
  // Once per iteration: several more intervals bring no second record.
  CHECK(r.process->wait(milliseconds(600)) == -1);
  CHECK(processRunning(r.pid));
  CHECK(job.faults().size() == 1);
  r.process->kill(SIGKILL);
  CHECK(waitExit(r.monitorPid, milliseconds(3000)) == 0);
}

TEST_CASE("the hard timeout kills a stopped rank", "[monitor][hard]") {
  Job job("hard");
  const std::vector<std::string> opts = {
      "--behaviour",       "ping", "--iteration",          "1",    "--soft-timeout-ms", "200",
      "--hard-timeout-ms", "600",  "--barrier-timeout-ms", "5000", "--grace-ms",        "300"};
  FakeRank r = job.start(0, 2, opts);
  FakeRank partner = job.start(1, 2, opts);
  job.store().wait({job.keys().heartbeat(0), job.keys().heartbeat(1)}, milliseconds(3000));
  const auto stopped = Clock::now();
  r.process->kill(SIGSTOP);
  // SIGCONT + SIGTERM end it (default action): hard timeout + interval + bound.
  CHECK(r.process->wait(milliseconds(5000)) == 128 + SIGTERM);
  const int64_t latency = msSince(stopped);
  CHECK(latency >= 550);
  CHECK(latency < 600 + 100 + kSlackMs);  // hard timeout + interval + bound
  WARN("stopped rank killed " << latency << " ms after SIGSTOP");
  job.store().wait({job.keys().terminated(0)}, milliseconds(2000));
  CHECK(*job.store().get(job.keys().terminated(0)) == "hard-timeout");
  CHECK(waitExit(r.monitorPid, milliseconds(3000)) == 0);
  std::vector<rp::FaultRecord> faults;
  for (const auto& f : job.faults()) {
    if (f.subject == 0) {  // (the partner is only there to be watched)
      faults.push_back(f);
    }
  }
  // The soft timeout normally comes first (the rank was running; a monitor
  // descheduled past the hard timeout skips it), then the hard one; the
  // death after the kill adds no record of its own.
  for (const auto& f : faults) {
    UNSCOPED_INFO(f.describe());
  }
  REQUIRE_FALSE(faults.empty());
  CHECK(faults.size() <= 2);
  CHECK(faults.back().reason == rp::FaultReason::kHardTimeout);
  CHECK(faults.back().culprit == 0);
  if (faults.size() == 2) {
    CHECK(faults[0].reason == rp::FaultReason::kSoftTimeout);
  }
  CHECK(job.store().exists(job.keys().interrupted(1)));
  CHECK(job.countedAtBarrier(0, 1, 2));
  partner.process->kill(SIGKILL);
  CHECK(waitExit(partner.monitorPid, milliseconds(3000)) == 0);
}

TEST_CASE("a rank that ignores SIGTERM is killed after the grace time", "[monitor][hard]") {
  Job job("grace");
  FakeRank r =
      job.start(0, 1,
                {"--behaviour", "ignore-term", "--soft-timeout-ms", "200", "--hard-timeout-ms",
                 "400", "--barrier-timeout-ms", "5000", "--grace-ms", "300"});
  const auto started = Clock::now();
  CHECK(r.process->wait(milliseconds(5000)) == 128 + SIGKILL);
  const int64_t latency = msSince(started);
  CHECK(latency >= 650);                        // hard + grace
  CHECK(latency < 400 + 300 + 100 + kSlackMs);  // + interval + bound
  CHECK(waitExit(r.monitorPid, milliseconds(3000)) == 0);
  CHECK(job.log(0).find("SIGKILL") != std::string::npos);
}

TEST_CASE("a lost node (rank and monitor) is found by its sibling", "[monitor][sibling]") {
  Job job("sibling");
  const std::vector<std::string> opts = {"--behaviour", "ping", "--iteration", "4"};
  FakeRank r0 = job.start(0, 3, opts);
  FakeRank r1 = job.start(1, 3, opts);
  FakeRank r2 = job.start(2, 3, opts);
  job.store().wait({job.keys().heartbeat(0), job.keys().heartbeat(1), job.keys().heartbeat(2)},
                   milliseconds(3000));
  const auto lost = Clock::now();
  ::kill(r1.monitorPid, SIGKILL);  // the monitor first: nobody on the node reports
  r1.process->kill(SIGKILL);
  CHECK(waitExit(r1.monitorPid, milliseconds(2000)) == 128 + SIGKILL);
  job.store().wait({job.keys().interrupted(4)}, milliseconds(3000));
  const int64_t latency = msSince(lost);
  CHECK(latency < 1000 + 100 + kSlackMs);  // heartbeat timeout + interval + bound
  WARN("lost node recorded " << latency << " ms after the kill");
  CHECK(*job.store().get(job.keys().terminated(1)) == "unresponsive");
  const auto faults = job.faults();
  REQUIRE(faults.size() == 1);
  CHECK(faults[0].reason == rp::FaultReason::kUnresponsive);
  CHECK(faults[0].subject == 1);
  CHECK(faults[0].culprit == 1);
  CHECK(faults[0].reporter == 0);  // rank 0 watches rank 1
  CHECK(faults[0].iteration == 4);
  CHECK(job.countedAtBarrier(1, 4, 3));
  CHECK_FALSE(job.store().exists(job.keys().terminated(0)));
  CHECK_FALSE(job.store().exists(job.keys().terminated(2)));
  r0.process->kill(SIGKILL);
  r2.process->kill(SIGKILL);
  CHECK(waitExit(r0.monitorPid, milliseconds(3000)) == 0);
  CHECK(waitExit(r2.monitorPid, milliseconds(3000)) == 0);
}

TEST_CASE("a rank that finishes leaves no record", "[monitor][done]") {
  Job job("done");
  // Two ranks through the termination barrier (the first waits for the
  // second), then done; a third job of one rank leaves with an error.
  FakeRank r0 = job.start(0, 2, {"--behaviour", "done", "--for-ms", "100"});
  FakeRank r1 = job.start(1, 2, {"--behaviour", "done", "--for-ms", "400"});
  CHECK(waitExit(r0.monitorPid, milliseconds(3000)) == 0);
  CHECK(waitExit(r1.monitorPid, milliseconds(3000)) == 0);
  CHECK(r0.process->wait(milliseconds(3000)) == 0);
  CHECK(r1.process->wait(milliseconds(3000)) == 0);
  CHECK_FALSE(job.store().exists(job.keys().faultCount()));
  CHECK_FALSE(job.store().exists(job.keys().terminated(0)));
  CHECK_FALSE(job.store().exists(job.keys().terminated(1)));
  CHECK_FALSE(job.store().exists(job.keys().heartbeat(0)));
  CHECK_FALSE(job.store().exists(job.keys().heartbeat(1)));
  CHECK(job.log(0).find("its rank is done") != std::string::npos);
}

TEST_CASE("a rank that leaves the loop with an error and its own record: nothing more",
          "[monitor][done]") {
  Job job("failed");
  FakeRank r = job.start(0, 1, {"--behaviour", "failed", "--for-ms", "200"});
  CHECK(r.process->wait(milliseconds(3000)) == 1);
  CHECK(waitExit(r.monitorPid, milliseconds(3000)) == 0);
  CHECK_FALSE(job.store().exists(job.keys().faultCount()));
  CHECK(job.store().exists(job.keys().terminated(0)));  // its own
  CHECK(job.log(0).find("left the loop with an error and ended") != std::string::npos);
}

// Issue 34 (the store killed right after a SIGKILL): a rank that left the
// loop because the store did not answer it wrote no terminated mark, and its
// monitor, seeing phase failed, recorded nothing and removed the heartbeat:
// the others waited for it at their barrier until its heartbeat was missed.
TEST_CASE("a rank that left the loop without its own record is recorded as an end",
          "[monitor][death]") {
  Job job("failed-unrecorded");
  FakeRank partner = job.start(0, 2, {"--behaviour", "ping"});
  FakeRank r = job.start(1, 2, {"--behaviour", "failed-unrecorded", "--for-ms", "200"});
  CHECK(r.process->wait(milliseconds(3000)) == 1);
  job.store().wait({job.keys().interrupted(0)}, milliseconds(3000));
  CHECK(job.store().exists(job.keys().terminated(1)));
  const auto faults = job.faults();
  REQUIRE(faults.size() == 1);
  CHECK(faults[0].reason == rp::FaultReason::kTerminated);
  CHECK(faults[0].subject == 1);
  CHECK(faults[0].detail.find("no record of its own") != std::string::npos);
  CHECK(waitExit(r.monitorPid, milliseconds(3000)) == 0);
  partner.process->kill(SIGKILL);
  CHECK(waitExit(partner.monitorPid, milliseconds(3000)) == 0);
}

// Issue 34: a joiner that drew a number in use from a restarted store
// withdraws; its monitor recorded its end as a joiner's (terminated/<r>, a
// fault) and removed heartbeat/<r>: the initial rank of the live process that
// holds the number, which the others then discarded. Now it writes nothing.
TEST_CASE("a withdrawn joiner's monitor leaves its initial rank to the process that holds it",
          "[monitor][done]") {
  Job job("withdrawn");
  // A long heartbeat expiry: the key outlives the checks below on any machine.
  FakeRank r = job.start(0, 1,
                         {"--behaviour", "withdrawn", "--for-ms", "300", "--heartbeat-timeout-ms",
                          "20000", "--barrier-timeout-ms", "30000"});
  // The heartbeat is up before the rank withdraws (its holder's key too).
  job.store().waitGet(job.keys().heartbeat(0), milliseconds(3000));
  CHECK(r.process->wait(milliseconds(3000)) == 76);
  CHECK(waitExit(r.monitorPid, milliseconds(3000)) == 0);
  CHECK_FALSE(job.store().exists(job.keys().faultCount()));
  CHECK_FALSE(job.store().exists(job.keys().terminated(0)));
  CHECK(job.store().exists(job.keys().heartbeat(0)));
  CHECK(job.log(0).find("withdrew") != std::string::npos);
}

TEST_CASE("a monitor whose store is gone keeps watching its rank, and leaves when the rank ends",
          "[monitor][failure]") {
  // Issue 19 finding 1: after the store timeout every monitor gave up and
  // left its rank unwatched; a monitor must still enforce its rank's
  // timeouts without a store.
  Job job("storeloss");
  ::setenv("NCCL_RESILIENT_STORE_RECONNECT_TIMEOUT_MS", "100", 1);
  FakeRank r = job.start(0, 1, {"--behaviour", "ping", "--store-timeout-ms", "400"});
  ::unsetenv("NCCL_RESILIENT_STORE_RECONNECT_TIMEOUT_MS");
  job.store().wait({job.keys().heartbeat(0)}, milliseconds(3000));
  job.stopServer();
  // Well past the store timeout (400 ms): still there, still watching.
  CHECK(waitExit(r.monitorPid, milliseconds(2000)) == -1);
  CHECK(processRunning(r.pid));
  CHECK(job.log(0).find("the rank's timeouts are still enforced") != std::string::npos);
  r.process->kill(SIGKILL);
  CHECK(waitExit(r.monitorPid, milliseconds(5000)) == 0);
  CHECK(job.log(0).find("the death of rank 0 could not be recorded") != std::string::npos);
}

TEST_CASE("a monitor whose store never answers watches its rank from its start",
          "[monitor][failure]") {
  // CI finding (restart-loop-processes-store): a store frozen while a monitor
  // started kept that monitor inside the store client's connect (up to
  // STORE_CONNECT_TIMEOUT_MS, 60 s) before it watched anything, and its
  // rank, hung, was never killed. A listening socket that never accepts
  // stands for the frozen store: connect succeeds, no handshake comes.
  const resilient::test::LoopbackSocket silent = resilient::test::bindLoopback(true);
  const std::string url = "tcp://127.0.0.1:" + std::to_string(silent.port);
  Job job("frozenstart");
  const auto started = Clock::now();
  FakeRank r =
      job.start(0, 1,
                {"--behaviour", "silent", "--soft-timeout-ms", "300", "--hard-timeout-ms", "600",
                 "--barrier-timeout-ms", "5000", "--grace-ms", "300", "--store-timeout-ms", "400"},
                url);
  // SIGTERM ends it (default action): the hard timeout, plus the store calls
  // it tries first (the heartbeat, the soft and hard records: 400 ms each).
  CHECK(r.process->wait(milliseconds(10000)) == 128 + SIGTERM);
  const int64_t latency = msSince(started);
  CHECK(latency < 600 + 3 * 400 + kSlackMs);
  WARN("hung rank killed " << latency << " ms after its start, its store silent");
  CHECK(job.log(0).find("the rank's timeouts are still enforced") != std::string::npos);
  CHECK(job.log(0).find("hard timeout in iteration") != std::string::npos);
  CHECK(waitExit(r.monitorPid, milliseconds(5000)) >= 0);
}

TEST_CASE("resilient-monitor refuses bad arguments", "[monitor][cli]") {
  const std::vector<std::string> base = {monitorBinary(),
                                         "--status-fd",
                                         "0",
                                         "--store",
                                         "memory",
                                         "--job",
                                         "j",
                                         "--rank",
                                         "0",
                                         "--world-size",
                                         "2",
                                         "--interval-ms",
                                         "100",
                                         "--heartbeat-interval-ms",
                                         "50",
                                         "--heartbeat-timeout-ms",
                                         "300",
                                         "--barrier-timeout-ms",
                                         "5000",
                                         "--grace-ms",
                                         "100"};
  auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv = base;
    argv.insert(argv.end(), extra.begin(), extra.end());
    ChildProcess p(argv);
    return p.wait(milliseconds(5000));
  };
  CHECK(run({"--soft-timeout-ms", "900", "--hard-timeout-ms", "800"}) == 2);
  CHECK(run({"--soft-timeout-ms", "90", "--hard-timeout-ms", "800"}) == 2);  // interval < soft
  CHECK(run({"--soft-timeout-ms", "abc", "--hard-timeout-ms", "800"}) == 2);
  CHECK(run({"--hard-timeout-ms", "800"}) == 2);  // --soft-timeout-ms missing
}
