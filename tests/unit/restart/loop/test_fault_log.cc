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

TEST_CASE("culprits come from the records within the window of the first", "[restart][faults]") {
  const uint64_t ms = 1000000;
  const std::vector<FaultRecord> records = {
      record(0, FaultReason::kNetFault, 5, 1000 * ms),
      record(0, FaultReason::kTerminated, 5, 1030 * ms),
      record(0, FaultReason::kNetFault, 7, 1040 * ms),      // concurrent
      record(0, FaultReason::kNetFault, 2, 1400 * ms),      // a consequence: too late
      record(0, FaultReason::kException, -1, 1001 * ms),    // no culprit
      record(0, FaultReason::kRestartAbort, 9, 1001 * ms),  // never a culprit
  };
  CHECK(restart::culpritsOf(records, std::chrono::milliseconds(100)) == std::set<int>{5, 7});
  CHECK(restart::culpritsOf(records, std::chrono::milliseconds(500)) == std::set<int>{2, 5, 7});
  CHECK(restart::culpritsOf({}, std::chrono::milliseconds(500)).empty());
}
