// Fault records in the store and the culprits of an iteration.
#include <catch2/catch.hpp>

#include "restart/loop/job/culprits.h"
#include "restart/protocol/fault_log.h"
#include "store/memory_store.h"

using namespace resilient;
using restart::protocol::FaultReason;
using restart::protocol::FaultRecord;

namespace {

FaultRecord record(int iteration, FaultReason reason, int culprit, uint64_t wallNs) {
  FaultRecord r;
  r.iteration = iteration;
  r.reason = reason;
  r.reporter = 0;
  r.culprit = culprit;
  r.wallNs = wallNs;
  return r;
}

}  // namespace

TEST_CASE("a published record raises its iteration's key and reads back", "[restart][faults]") {
  store::MemoryStore store;
  const restart::protocol::JobKeys keys("job");
  restart::protocol::FaultLog log(store, keys);
  CHECK(log.publish(record(0, FaultReason::kSoftTimeout, 3, 0)) == 1);
  CHECK(log.publish(record(1, FaultReason::kException, -1, 0)) == 2);
  CHECK(store.get(keys.interrupted(0)) == "soft-timeout");
  CHECK(store.get(keys.interrupted(1)) == "exception");
  CHECK(!store.get(keys.interrupted(2)));
  const auto of0 = log.recordsOf(0);
  REQUIRE(of0.size() == 1);
  CHECK(of0[0].culprit == 3);
  CHECK(of0[0].wallNs != 0);  // filled in
  CHECK(of0[0].pid != 0);
}

TEST_CASE("the first record of an iteration keeps the interruption reason", "[restart][faults]") {
  store::MemoryStore store;
  const restart::protocol::JobKeys keys("job");
  restart::protocol::FaultLog log(store, keys);
  log.publish(record(4, FaultReason::kTerminated, 1, 0));
  log.publish(record(4, FaultReason::kNetFault, 1, 0));
  CHECK(store.get(keys.interrupted(4)) == "terminated");
}

TEST_CASE("a record detected before the named rank's abort names the culprit",
          "[restart][faults]") {
  const uint64_t ms = 1000000;
  std::vector<FaultRecord> records = {
      record(0, FaultReason::kNetFault, 5, 1000 * ms),    // 5 never aborted (dead)
      record(0, FaultReason::kNetFault, 7, 1040 * ms),    // before 7's abort: a fault of 7
      record(0, FaultReason::kNetFault, 2, 1400 * ms),    // after 2's abort: its consequence
      record(0, FaultReason::kException, -1, 1001 * ms),  // no culprit
      record(0, FaultReason::kRestartAbort, 9, 1001 * ms),  // never a culprit
  };
  const restart::AbortTimes begun = {{7, 1050 * ms}, {2, 1010 * ms}, {9, 1002 * ms}};
  CHECK(restart::namedRanks(records) == std::set<int>{2, 5, 7});
  CHECK(restart::culpritsOf(records, begun) == std::set<int>{5, 7});
  // While ranks may still be on their way to the barrier, one without an
  // abort time yet is named only by a fault detected before any abort.
  CHECK(restart::culpritsOf(records, begun, /*firstAbortNs=*/0) == std::set<int>{7});
  CHECK(restart::culpritsOf(records, begun, 999 * ms) == std::set<int>{7});
  CHECK(restart::culpritsOf(records, begun, 1002 * ms) == std::set<int>{5, 7});
  // The detection time, not the publication, is what counts.
  records[2].detectedNs = 1005 * ms;
  CHECK(restart::culpritsOf(records, begun) == std::set<int>{2, 5, 7});
  CHECK(restart::culpritsOf({}, begun).empty());
}

// Issue 34 (bench_restart.py, 64 ranks on 2 cores, 2 of 3 runs "culprits
// none named"): a survivor's own exception record (no culprit) is published
// first; the record naming the killed rank lands 50 ms later, past the old
// window of 20 ms, though its fault was detected at once. The old rule
// (records within lastCallWait of the first) named nobody.
TEST_CASE("the victim is named however late its record is published", "[restart][faults]") {
  store::MemoryStore store;
  const restart::protocol::JobKeys keys("job");
  restart::protocol::FaultLog log(store, keys);
  const uint64_t t0 = 1000 * 1000000ULL;
  const uint64_t ms = 1000000;
  // Rank 1, a survivor: its wrapped function threw, it began its abort.
  log.publish(record(3, FaultReason::kException, -1, t0));
  store.set(keys.abortBegun(3, 1), std::to_string(t0 + 1 * ms));
  // Rank 2's plugin saw rank 6 (killed) gone at t0 + 2 ms; published at +50 ms.
  FaultRecord late = record(3, FaultReason::kNetFault, 6, t0 + 50 * ms);
  late.reporter = 2;
  late.detectedNs = t0 + 2 * ms;
  log.publish(late);
  // Rank 2 also names rank 1, whose abort closed its connections: a consequence.
  FaultRecord consequence = record(3, FaultReason::kNetFault, 1, t0 + 60 * ms);
  consequence.detectedNs = t0 + 5 * ms;
  log.publish(consequence);
  const std::vector<FaultRecord> records = log.recordsOf(3);
  REQUIRE(records.size() == 3);
  CHECK(records[1].detectedNs == t0 + 2 * ms);  // survives the store
  const restart::AbortTimes begun =
      restart::readAbortTimes(store, keys, 3, restart::namedRanks(records));
  CHECK(begun == restart::AbortTimes{{1, t0 + 1 * ms}});
  CHECK(restart::culpritsOf(records, begun) == std::set<int>{6});
}

TEST_CASE("the first abort is the least any rank published", "[restart][faults]") {
  store::MemoryStore store;
  const restart::protocol::JobKeys keys("job");
  CHECK(restart::readFirstAbort(store, keys, 2) == 0);
  restart::lowerFirstAbort(store, keys, 2, 500);
  restart::lowerFirstAbort(store, keys, 2, 700);  // later: kept lower
  CHECK(restart::readFirstAbort(store, keys, 2) == 500);
  restart::lowerFirstAbort(store, keys, 2, 300);
  CHECK(restart::readFirstAbort(store, keys, 2) == 300);
  CHECK(restart::readFirstAbort(store, keys, 3) == 0);
}
