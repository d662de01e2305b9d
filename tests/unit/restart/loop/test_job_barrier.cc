// The job's barriers (restart/loop/job/barrier.h): the ranks recorded
// terminated are counted on their behalf, but only those of the World's
// slots: a process that ended while joining the job has an initial rank past
// them until an admission counts it in.
#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "restart/loop/job/barrier.h"
#include "restart/protocol/job_keys.h"
#include "restart/protocol/terminated_ranks.h"
#include "store/memory_store.h"
#include "store/errors.h"
#include "tests/support/forwarding_store.h"
#include "tests/unit/restart/loop/restarting_store.h"

using namespace resilient;
using std::chrono::milliseconds;

// The agent drill, since c19bf0a: a joiner (initial rank 14, the World 14
// slots) ended while joining; every rank then counted it at the iteration
// barrier, which failed them all ("overflow: it expects ranks 0-13, surplus
// rank 14 arrived") and hung the job.
TEST_CASE("a joiner that ended while joining is not counted at the World's barriers",
          "[restart][loop][join]") {
  store::MemoryStore s;
  const restart::protocol::JobKeys keys("job");
  constexpr int kSlots = 4;
  restart::protocol::markTerminated(s, keys, 1, "a rank of the World");
  restart::protocol::markTerminated(s, keys, kSlots + 2, "ended while joining");
  std::vector<std::thread> ranks;
  std::vector<int> failed(kSlots, 0);
  for (const int r : {0, 2, 3}) {
    ranks.emplace_back([&, r] {
      restart::JobBarrierOptions o;
      o.initialRank = r;
      o.worldSize = kSlots;
      o.chunk = milliseconds(50);
      restart::JobBarrier b(s, keys, o);
      try {
        b.wait("iteration", 4, milliseconds(5000), {});
      } catch (const std::exception& e) {
        INFO(e.what());
        failed[static_cast<size_t>(r)] = 1;
      }
    });
  }
  for (std::thread& t : ranks) {
    t.join();
  }
  CHECK(failed == std::vector<int>(kSlots, 0));
}

// The agent drill's store kills (seed 404): a reader of the terminated list
// had read 3 entries; the store restarted empty and the list was put back, 3
// entries again before the reader looked, then a death came. The reader took
// the list for the one it had read (only a shorter list told it to start
// over) and never saw the death: a barrier waited for the dead rank.
TEST_CASE("a terminated list put back after a store restart is read from its start",
          "[restart][loop][store-restart]") {
  test::RestartingStoreServer server;
  auto client = server.client();
  const restart::protocol::JobKeys keys("job");
  for (const int r : {0, 1, 2}) {
    restart::protocol::markTerminated(*client, keys, r, "before");
  }
  restart::protocol::TerminatedRanks reader(*client, keys);
  CHECK(reader.refresh() == std::set<int>{0, 1, 2});
  server.restart();
  for (const int r : {0, 1, 5}) {  // put back, and a new death
    restart::protocol::markTerminated(*client, keys, r, "after");
  }
  CHECK(reader.refresh() == std::set<int>{0, 1, 2, 5});
}

// The agent drill with the store killed 30 ms after a SIGKILL (seed 11):
// the ranks waiting at the iteration barrier had counted a dead spare on its
// behalf; the store restarted empty, their own arrivals were sent again, the
// killed rank's mark was put back and counted, but nobody counted the spare
// again: every rank waited out the barrier timeout ("ranks 7 are missing").
TEST_CASE("a rank counted on its behalf is counted again after a store restart",
          "[restart][loop][store-restart]") {
  test::RestartingStoreServer server;
  const restart::protocol::JobKeys keys("job");
  constexpr int kSlots = 4;
  restart::protocol::markTerminated(*server.client(), keys, 2, "a spare died");
  std::vector<int> failed(2, 0);
  std::atomic<int> counted{0};
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      auto client = server.client();
      restart::JobBarrierOptions o;
      o.initialRank = r;
      o.worldSize = kSlots;
      o.chunk = milliseconds(50);
      restart::JobBarrier b(*client, keys, o);
      b.terminated();  // rank 2 known before the wait
      ++counted;
      try {
        b.wait("iteration", 1, milliseconds(3000), {});
      } catch (const std::exception& e) {
        INFO(e.what());
        failed[static_cast<size_t>(r)] = 1;
      }
    });
  }
  // Both wait, rank 2 counted for it on the instance that goes; rank 3 dies
  // after the restart (its mark the first on the new instance).
  while (counted < 2) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  std::this_thread::sleep_for(milliseconds(300));
  server.restart();
  restart::protocol::markTerminated(*server.client(), keys, 3, "died");
  for (std::thread& t : ranks) {
    t.join();
  }
  CHECK(failed == std::vector<int>(2, 0));
}

namespace {

// The job's store, whose connection is lost once, in a read of the
// terminated list (the node proxy closing its old instance's connections
// after a store restart; the client's short slice ran out before it sent
// the call again).
class LosesOneRead final : public test::ForwardingStore {
 public:
  LosesOneRead() : ForwardingStore(std::make_shared<store::MemoryStore>()) {}
  std::atomic<bool> lost{false};
  std::vector<std::optional<std::string>> multiGet(const std::vector<std::string>& k,
                                                   store::Timeout t) override {
    if (!lost.exchange(true)) {
      throw store::ConnectionLost("connection to store server lost during multiGet (test)");
    }
    return ForwardingStore::multiGet(k, t);
  }
  std::string describe() const override { return "loses one read (memory)"; }
};

}  // namespace

// The torch drill with store kills (seed 3753302058): a spare waiting at the
// completion barrier in 10 ms slices had a read lost with its connection;
// ConnectionLost ended its wait, its function failed, and the store's loss
// restarted the job. A slice whose connection went is a slice the store did
// not answer: the wait goes on.
TEST_CASE("a barrier slice whose connection was lost is one without an answer",
          "[restart][loop][store-restart]") {
  LosesOneRead s;
  const restart::protocol::JobKeys keys("job");
  restart::protocol::markTerminated(s, keys, 1, "dead");
  restart::JobBarrierOptions o;
  o.initialRank = 0;
  o.worldSize = 2;
  o.chunk = milliseconds(10);
  o.storeSilence = milliseconds(5000);
  restart::JobBarrier b(s, keys, o);
  CHECK_NOTHROW(b.wait("completion", 3, milliseconds(5000), {}));
  CHECK(s.lost);
}
