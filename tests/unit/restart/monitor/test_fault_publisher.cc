// What the monitor writes to the store, on an in-memory store.
#include <unistd.h>

#include <catch2/catch.hpp>

#include "restart/monitor/fault_publisher.h"
#include "restart/monitor/heartbeat.h"
#include "store/memory_store.h"

namespace rm = resilient::restart::monitor;
namespace rp = resilient::restart::protocol;
namespace st = resilient::store;
using std::chrono::milliseconds;

TEST_CASE("fault records are appended with the reporter's identity", "[monitor][publisher]") {
  st::MemoryStore store;
  const rp::JobKeys keys("job");
  rm::FaultPublisher p(store, keys,
                       {.reporter = 2, .callTimeout = milliseconds(1000)});
  rp::FaultRecord r;
  r.iteration = 5;
  r.reason = rp::FaultReason::kUnresponsive;
  r.subject = 3;
  r.culprit = 3;
  r.detail = "gone";
  CHECK(p.publish(r) == 1);
  CHECK(p.publish(r) == 2);
  CHECK(*store.get(keys.faultCount()) == "2");
  const auto back = rp::FaultRecord::fromJson(*store.get(keys.fault(2)));
  CHECK(back.reporter == 2);
  CHECK(back.subject == 3);
  CHECK(back.culprit == 3);
  CHECK(back.iteration == 5);
  CHECK(back.reason == rp::FaultReason::kUnresponsive);
  CHECK(back.pid == ::getpid());
  CHECK(back.wallNs > 0);
  CHECK_FALSE(back.host.empty());
}

TEST_CASE("terminated and interrupted keep the first writer's reason", "[monitor][publisher]") {
  st::MemoryStore store;
  const rp::JobKeys keys("job");
  rm::FaultPublisher p(store, keys,
                       {.reporter = 0, .callTimeout = milliseconds(1000)});
  CHECK_FALSE(p.isTerminated(3));
  CHECK(p.markTerminated(3, rp::FaultReason::kTerminated));
  CHECK_FALSE(p.markTerminated(3, rp::FaultReason::kUnresponsive));
  CHECK(p.isTerminated(3));
  CHECK(*store.get(keys.terminated(3)) == "terminated");
  p.markInterrupted(7, rp::FaultReason::kSoftTimeout);
  p.markInterrupted(7, rp::FaultReason::kHardTimeout);
  CHECK(*store.get(keys.interrupted(7)) == "soft-timeout");
}

TEST_CASE("a rank is counted at the iteration barrier on its behalf", "[monitor][publisher]") {
  st::MemoryStore store;
  const rp::JobKeys keys("job");
  rm::FaultPublisher p(store, keys,
                       {.reporter = 0, .callTimeout = milliseconds(1000)});
  p.countAtIterationBarrier(1, 4, 2);
  p.countAtIterationBarrier(1, 4, 2);  // idempotent
  st::BarrierArrival a{keys.iterationBarrier(), 4, 0, 2, true};
  const auto result = store.barrier(a, milliseconds(1000));
  CHECK(result.completed);
  CHECK(result.arrived == 2);
}

TEST_CASE("the heartbeat is refreshed every interval and expires", "[monitor][publisher]") {
  st::MemoryStore store;
  const rp::JobKeys keys("job");
  rm::Heartbeat hb(
      store, keys.heartbeat(1),
      {.interval = milliseconds(50), .ttl = milliseconds(200), .callTimeout = milliseconds(1000)});
  constexpr uint64_t kMs = 1000000;
  hb.beatIfDue(1000 * kMs);
  const std::string first = *store.get(keys.heartbeat(1));
  CHECK(hb.nextDueNs() == 1050 * kMs);
  hb.beatIfDue(1049 * kMs);  // not due: same value
  CHECK(*store.get(keys.heartbeat(1)) == first);
  hb.beatIfDue(1050 * kMs);
  CHECK(hb.nextDueNs() == 1100 * kMs);
  // The key expires when no one refreshes it (a missing monitor).
  store.wait({keys.heartbeat(1)}, milliseconds(100));
  const auto deadline = std::chrono::steady_clock::now() + milliseconds(2000);
  while (store.exists(keys.heartbeat(1)) && std::chrono::steady_clock::now() < deadline) {
    ::usleep(10000);  // expiry has no event to wait on
  }
  CHECK_FALSE(store.exists(keys.heartbeat(1)));
  hb.beatIfDue(2000 * kMs);
  CHECK(store.exists(keys.heartbeat(1)));
  hb.remove();
  CHECK_FALSE(store.exists(keys.heartbeat(1)));
}
