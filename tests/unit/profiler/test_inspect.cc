// resilient-inspect on regions the profiler wrote: the communicator table and
// flight recorder as JSON (live, and post-mortem from a copy; v7's user tags
// and initial syncs), the cross-rank comparison that names who is behind, and
// --job naming a stuck rank from the live regions of a job's processes.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "abi_driver.h"
#include "blackbox/writer.h"
#include "common/clock.h"
#include "event_stream.h"
#include "plugin_scope.h"
#include "tests/support/temp_dir.h"

#ifndef RESILIENT_INSPECT_PATH
#error "RESILIENT_INSPECT_PATH must name the resilient-inspect binary"
#endif

namespace resilient::test {
namespace {

// Runs resilient-inspect with `args`; returns its stdout and sets *status.
std::string inspect(const std::string& args, int* status) {
  const std::string cmd = std::string(RESILIENT_INSPECT_PATH) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) {
    out.append(buf, n);
  }
  *status = pclose(p);
  return out;
}

nlohmann::json inspectJson(const std::string& args) {
  int status = 0;
  const std::string out = inspect("--json " + args, &status);
  INFO(out);
  REQUIRE(status == 0);
  return nlohmann::json::parse(out);
}

// Replays `done` complete collectives, then `pending` that are only enqueued,
// on communicator `commHash` as `rank`, `agoNs` before the monotonic clock's
// now (0: at the fake clock's start), and calls `whileLive` while the region
// shows them.
void replayRank(const std::string& dir, uint64_t commHash, int rank, int done, int pending,
                uint64_t agoNs, const std::function<void()>& whileLive) {
  ScopeOptions o;
  o.blackboxDir = dir;
  o.flightOps = 16;
  PluginScope scope(o);
  if (agoNs != 0) {
    scope.clock.advance(monotonicNs() - agoNs - scope.clock.monoNs());
  }
  auto driver = makeDriver(5);
  CommSpec comm;
  comm.commHash = commHash;
  comm.rank = rank;
  comm.nranks = 2;
  StreamBuilder b(5, commHash, rank);
  for (int i = 0; i < done; ++i) {
    CollSpec c;
    c.seqNumber = static_cast<uint64_t>(i);
    b.collective(c);
  }
  std::vector<Event> events = b.events;
  StreamBuilder rest(5, commHash, rank);
  for (int i = done; i < done + pending; ++i) {
    CollSpec c;
    c.seqNumber = static_cast<uint64_t>(i);
    rest.collective(c);
  }
  Replay r(*driver, comm);
  r.run(events, false);
  // Only the user-thread events of the pending ones (their ids follow on).
  for (auto e : rest.events) {
    if (e.thread == 0) {
      e.id += b.ids();
      e.parent = e.parent >= 0 ? e.parent + b.ids() : -1;
      std::vector<Event> one{e};
      r.run(one, false);
    }
  }
  scope.scan();
  whileLive();
}

// The same, then copies the region to `copyTo`.
void rankScenario(const std::string& dir, uint64_t commHash, int rank, int done, int pending,
                  const std::string& copyTo) {
  replayRank(dir, commHash, rank, done, pending, 0, [&] {
    std::filesystem::copy_file(blackbox::regionPath(dir, static_cast<uint32_t>(getpid())), copyTo);
  });
}

// One rank of a job in a process of its own (the detectors tell a job's
// processes apart by pid): a child replays as replayRank into its live
// region in `dir` and keeps it live until the object goes away.
class RankProcess {
 public:
  RankProcess(const std::string& dir, uint64_t commHash, int rank, int done, int pending,
              uint64_t agoNs) {
    int ready[2];
    int release[2];
    REQUIRE(pipe(ready) == 0);
    REQUIRE(pipe(release) == 0);
    pid_ = fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      close(ready[0]);
      close(release[1]);
      int rc = 0;
      try {
        replayRank(dir, commHash, rank, done, pending, agoNs, [&] {
          const char byte = 'r';
          if (write(ready[1], &byte, 1) != 1) {
            rc = 3;
            return;
          }
          char c = 0;
          while (read(release[0], &c, 1) > 0) {
          }
        });
      } catch (...) {
        rc = 2;
      }
      _exit(rc);  // no Catch2, no destructors of the parent's objects
    }
    close(ready[1]);
    close(release[0]);
    release_ = release[1];
    char c = 0;
    const ssize_t n = read(ready[0], &c, 1);
    close(ready[0]);
    if (n != 1) {  // the child failed: reap it before failing
      close(release_);
      int status = 0;
      waitpid(pid_, &status, 0);
      FAIL("rank " << rank << "'s process exited before its region was live: status " << status);
    }
  }
  ~RankProcess() {
    close(release_);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  RankProcess(const RankProcess&) = delete;
  RankProcess& operator=(const RankProcess&) = delete;

  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int release_ = -1;
};

std::vector<nlohmann::json> jsonLines(const std::string& out) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) {
      lines.push_back(nlohmann::json::parse(line));
    }
  }
  return lines;
}

}  // namespace

TEST_CASE(
    "resilient-inspect --json shows the communicator table, the flight recorder and the "
    "hang fault, live and post-mortem",
    "[profiler][inspect]") {
  TempDir dir;
  ScopeOptions o;
  o.blackboxDir = dir.path().string();
  o.flightOps = 16;
  o.collTimeoutMs = 500;
  PluginScope scope(o);
  auto driver = makeDriver(5);
  CommSpec comm;
  comm.commHash = 0xabcdef0123456789ull;
  comm.name = "tp";
  comm.rank = 1;
  comm.nranks = 4;
  StreamBuilder b(5, comm.commHash, comm.rank);
  for (int i = 0; i < 5; ++i) {
    CollSpec c;
    c.seqNumber = static_cast<uint64_t>(i);
    c.nChannels = 2;
    b.collective(c);
  }
  CollSpec hung;
  hung.seqNumber = 5;
  hung.nChannels = 2;
  hung.neverStop = {1};
  b.collective(hung);
  Replay r(*driver, comm);
  r.run(b.events, false);
  for (int i = 0; i < 30; ++i) {
    scope.clock.advanceMs(50);
    scope.scan();
  }
  REQUIRE(scope.sink.size() == 1);
  const std::string path = blackbox::regionPath(dir.path().string(), getpid());

  const auto j = inspectJson(path);
  CHECK(j["version"] == RESILIENT_BLACKBOX_VERSION);
  CHECK(j["process_alive"] == true);
  REQUIRE(j["communicators"].size() == 1);
  const auto& c = j["communicators"][0];
  CHECK(c["comm_id"] == comm.commHash);
  CHECK(c["comm_hex"] == "0xabcdef0123456789");
  CHECK(c["name"] == "tp");
  CHECK(c["rank"] == 1);
  CHECK(c["nranks"] == 4);
  CHECK(c["state"] == "active");
  CHECK(c["coll_enqueued"] == 6);
  CHECK(c["coll_completed"] == 5);
  CHECK(c["completed_by_func"]["AllReduce"] == 5);
  CHECK(c["in_flight"] == 1);
  CHECK(c["oldest_in_flight"]["state"] == "hung");
  CHECK(c["oldest_in_flight"]["seq_number"] == 5);
  CHECK(c["oldest_in_flight"]["stuck_channels"] == nlohmann::json::array({1}));
  CHECK(c["oldest_in_flight"]["last_step_state"] == "RecvWait");
  REQUIRE(c["flight_recorder"].size() == 5);
  CHECK(c["flight_recorder"][4]["coll_index"] == 5);
  CHECK(c["flight_recorder"][4]["state"] == "completed");
  CHECK(c["flight_recorder"][4]["gpu_us"].is_number());
  REQUIRE(j["faults"].size() == 1);
  CHECK(j["faults"][0]["class"] == "collective hung");
  CHECK(j["faults"][0]["op"] == "AllReduce");
  CHECK(j["faults"][0]["seq_number"] == 5);
  CHECK(j["faults"][0]["stuck_channels"] == nlohmann::json::array({1}));

  int status = 0;
  const std::string table = inspect(path, &status);
  CHECK(status == 0);
  CAPTURE(table);
  CHECK(table.find("AllReduce #6 seq 5 hung") != std::string::npos);
  CHECK(table.find("collective hung") != std::string::npos);

  // Post-mortem: the file a crashed process leaves behind reads the same.
  const std::string copy = dir.path().string() + "/post-mortem";
  std::filesystem::copy_file(path, copy);
  r.finalize();
  const auto pm = inspectJson(copy);
  REQUIRE(pm["communicators"].size() == 1);
  CHECK(pm["communicators"][0]["flight_recorder"].size() == 5);
  CHECK(pm["communicators"][0]["oldest_in_flight"]["state"] == "hung");
}

TEST_CASE("resilient-inspect --json shows v7's user tag and GPU-timed initial sync",
          "[profiler][inspect][v7]") {
  TempDir dir;
  ScopeOptions o;
  o.blackboxDir = dir.path().string();
  PluginScope scope(o);
  auto driver = makeDriver(7);
  CommSpec comm;
  StreamBuilder b(7, comm.commHash, comm.rank);
  CollSpec sym;
  sym.symmetric = true;
  sym.userTag = 424242;
  sym.syncNs = {3000, 12000};
  b.collective(sym);
  CollSpec classic;
  classic.seqNumber = 1;
  b.collective(classic);
  Replay r(*driver, comm);
  r.run(b.events, false);
  scope.scan();
  const auto j = inspectJson(blackbox::regionPath(dir.path().string(), getpid()));
  REQUIRE(j["communicators"].size() == 1);
  CHECK(j["communicators"][0]["abi_version"] == 7);
  const auto& flight = j["communicators"][0]["flight_recorder"];
  REQUIRE(flight.size() == 2);
  CHECK(flight[0]["user_tag"] == 424242);
  CHECK(flight[0]["sync_wait_ns"] == 12000);
  CHECK(flight[0]["symmetric"] == true);
  CHECK(flight[1]["user_tag"] == 0);
  CHECK(flight[1]["sync_wait_ns"] == 2100);
  CHECK(flight[1]["symmetric"] == false);
}

TEST_CASE("resilient-inspect compares ranks and names the one behind", "[profiler][inspect]") {
  TempDir dir;
  const uint64_t comm = 0x77aa77aa77aa77aaull;
  // Rank 0 completed 7 and waits in the 8th; rank 1 completed 7 and never
  // enqueued the 8th (it is behind).
  rankScenario(dir.path().string(), comm, 0, 7, 1, dir.path().string() + "/rank0");
  rankScenario(dir.path().string(), comm, 1, 7, 0, dir.path().string() + "/rank1");
  const auto j = inspectJson(dir.path().string() + "/rank0 " + dir.path().string() + "/rank1");
  REQUIRE(j["communicators"].size() == 1);
  const auto& c = j["communicators"][0];
  CHECK(c["comm_id"] == comm);
  REQUIRE(c["ranks"].size() == 2);
  CHECK(c["ranks"][0]["coll_enqueued"] == 8);
  CHECK(c["ranks"][0]["oldest_in_flight"]["seq_number"] == 7);
  CHECK(c["ranks"][1]["coll_enqueued"] == 7);
  CHECK(c["behind"] == nlohmann::json::array({1}));
  CAPTURE(c["summary"].get<std::string>());
  CHECK(c["summary"].get<std::string>().find("rank(s) 1 behind") != std::string::npos);
}

TEST_CASE(
    "resilient-inspect --job names a live rank that has not entered the collective the other "
    "waits in (stuck rank), prints it and records it in the stuck rank's blackbox",
    "[profiler][inspect]") {
  TempDir dir;
  const std::string d = dir.path().string();
  const uint64_t comm = 0x5a5a16f285f6c504ull;
  // Rank 0 completed 7 collectives and has waited in the 8th for 3 s; rank 1
  // completed the same 7 and is inside none (alive, not pinging).
  RankProcess waiting(d, comm, 0, 7, 1, 3000000000ull);
  RankProcess stuck(d, comm, 1, 7, 0, 3000000000ull);
  const std::string job = "--job --dir " + d + " --interval-ms 100 --seconds 0.15 ";

  int status = 0;
  std::string out = inspect("--json " + job + "--stuck-rank-timeout-ms 1000 --record", &status);
  INFO(out);
  REQUIRE(status == 0);
  std::vector<nlohmann::json> reports;
  for (const auto& line : jsonLines(out)) {
    if (line.contains("report")) {
      reports.push_back(line["report"]);
    } else {
      CHECK(line["processes"] == 2);
    }
  }
  REQUIRE(reports.size() == 1);  // once, however many rounds see it
  const auto& r = reports[0];
  CHECK(r["kind"] == "stuck rank");
  CHECK(r["comm_id"] == comm);
  CHECK(r["subject"]["rank"] == 1);
  CHECK(r["subject"]["pid"] == stuck.pid());
  CHECK(r["subject"]["host"] == "testhost");
  CHECK(r["coll_index"] == 8);
  CHECK(r["function"] == "AllReduce");
  CHECK(r["waiting_ranks"] == 1);
  CHECK(r["min_lag_ns"] == 1000000000ull);
  CHECK(r["waited_ns"].get<uint64_t>() >= 3000000000ull);
  CHECK(r["waited_ns"].get<uint64_t>() < 60000000000ull);
  const std::string text = r["text"].get<std::string>();
  CAPTURE(text);
  CHECK(text.rfind("stuck rank rank 1 (testhost pid " + std::to_string(stuck.pid()) +
                       ") on communicator 0x5a5a16f285f6c504: alive but has not entered "
                       "collective 8 (AllReduce), in which 1 of its ranks have waited for ",
                   0) == 0);
  CHECK(text.find("(threshold 1.0 s); not a fault, nothing aborted") != std::string::npos);

  // --record: the report is in the stuck rank's blackbox, as a report record,
  // and not in the other's.
  const auto stuckBox = inspectJson(blackbox::regionPath(d, static_cast<uint32_t>(stuck.pid())));
  REQUIRE(stuckBox["faults"].size() == 1);
  CHECK(stuckBox["faults"][0]["class"] == "stuck rank");
  CHECK(stuckBox["faults"][0]["comm_id"] == comm);
  CHECK(stuckBox["faults"][0]["text"] == text);
  const auto waitingBox =
      inspectJson(blackbox::regionPath(d, static_cast<uint32_t>(waiting.pid())));
  CHECK(waitingBox["faults"].empty());

  // As text.
  out = inspect(job + "--stuck-rank-timeout-ms 1000", &status);
  CAPTURE(out);
  CHECK(status == 0);
  CHECK(out.find("REPORT stuck rank rank 1 (testhost pid " + std::to_string(stuck.pid()) +
                 ") on communicator 0x5a5a16f285f6c504: alive but has not entered collective 8 "
                 "(AllReduce)") != std::string::npos);

  // Not before the timeout: rank 0 has waited 3 s, not 60.
  out = inspect(job + "--stuck-rank-timeout-ms 60000", &status);
  CHECK(status == 0);
  CHECK(out.find("REPORT") == std::string::npos);
}

}  // namespace resilient::test
