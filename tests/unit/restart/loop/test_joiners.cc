// The joiners' protocol (restart/loop/job/joiners.h) on one in-process
// store: a World's text, the numbers drawn, and how a joiner's wait ends.
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include <catch2/catch.hpp>

#include "resilient/restart/rank_assignment.hpp"
#include "restart/loop/job/joiners.h"
#include "restart/loop/job/rank_registry.h"
#include "restart/protocol/job_keys.h"
#include "restart/protocol/terminated_ranks.h"
#include "store/memory_store.h"
#include "tests/support/forwarding_store.h"

using namespace resilient;
using restart::JoinerWait;
using restart::RankIdentity;
using std::chrono::milliseconds;

namespace {

constexpr int kInitialWorldSize = 3;

struct JobStore {
  store::MemoryStore store;
  restart::protocol::JobKeys keys{"default"};
  restart::RankRegistry registry{store, keys, kInitialWorldSize};

  restart::JoinerTicket registerAs(const RankIdentity& me) {
    return restart::registerJoiner(store, keys, registry, kInitialWorldSize, me);
  }
  JoinerWait wait(const restart::JoinerTicket& ticket, const RankIdentity& me) {
    return restart::waitForAdmission(store, keys, registry, ticket, me, milliseconds(10), {});
  }
  // Joiners (0, total] admitted into iteration 1, the World of 3 + total slots.
  void admit(int64_t total) {
    restart::announceAdmissions(
        store, keys,
        restart::admissionsOf(store, keys, 0, 0, total, restart::World(kInitialWorldSize),
                              restart::World(kInitialWorldSize + static_cast<int>(total))));
  }
};

}  // namespace

TEST_CASE("a World goes through the store unchanged", "[restart][loop][join]") {
  restart::AssignmentContext c;
  c.terminated = {1};
  c.joined = 2;
  const restart::World w = restart::assignRanks(
      restart::World(5),
      *restart::compose(
          {restart::maxActiveWorldSize(3), restart::activateAllRanks(), restart::shiftRanks()}),
      c);
  CHECK(restart::worldFromText(restart::worldToText(w)) == w);
  CHECK_THROWS_AS(restart::worldFromText("[]"), std::invalid_argument);
  CHECK_THROWS_AS(restart::worldFromText("[[0,0,0],[0,0,1]]"), std::invalid_argument);
  CHECK_THROWS_AS(restart::worldFromText("[[0,7,0]]"), std::invalid_argument);
  CHECK_THROWS_AS(restart::worldFromText("{\"a\":1}"), std::invalid_argument);
}

// Issue 34 (the agent drill with the store killed 5 ms after a process): a
// replacement registered on the restarted store before the job's ranks put
// the queue back and drew number 1, whose initial rank a live process held;
// its claim of the rank refused it with "job id in use". Now the number is
// the other process's and it draws again.
TEST_CASE("a joiner draws again when its number's initial rank is held",
          "[restart][loop][join]") {
  JobStore job;
  const RankIdentity holder = RankIdentity::ofThisProcess();
  job.registry.publish(kInitialWorldSize, holder);  // put back by joiner 1, alive
  const RankIdentity me = RankIdentity::ofThisProcess();
  const restart::JoinerTicket ticket = job.registerAs(me);
  CHECK(ticket.number == 2);
  CHECK(ticket.initialRank == kInitialWorldSize + 1);
  CHECK(job.registry.holderOf(kInitialWorldSize)->sameProcess(holder));
  CHECK(job.registry.holderOf(kInitialWorldSize + 1)->sameProcess(me));
}

TEST_CASE("a joiner named by its admission is admitted", "[restart][loop][join]") {
  JobStore job;
  const RankIdentity me = RankIdentity::ofThisProcess();
  const restart::JoinerTicket ticket = job.registerAs(me);
  job.admit(1);
  const JoinerWait wait = job.wait(ticket, me);
  REQUIRE(wait.end == JoinerWait::End::kAdmitted);
  CHECK(wait.admission.iteration == 1);
  CHECK(wait.admission.world.initialWorldSize() == kInitialWorldSize + 1);
  CHECK(wait.admission.previous.initialWorldSize() == kInitialWorldSize);
}

// The same drill: the number drawn twice, the other process then put its
// identity back (an admitted rank overwrites a claim). Before, the joiner
// waited on as that rank and, woken by its admission put back, ran as a
// second process of it: the job hung at its completion barrier.
TEST_CASE("a joiner whose initial rank another process put back withdraws",
          "[restart][loop][join]") {
  JobStore job;
  const RankIdentity me = RankIdentity::ofThisProcess();
  const restart::JoinerTicket ticket = job.registerAs(me);
  REQUIRE(ticket.number == 1);
  const RankIdentity holder = RankIdentity::ofThisProcess();
  job.registry.publish(ticket.initialRank, holder);
  const JoinerWait wait = job.wait(ticket, me);
  REQUIRE(wait.end == JoinerWait::End::kWithdrawn);
  CHECK_THAT(wait.why, Catch::Contains("joiner 1: initial rank 3 is held by pid"));
}

TEST_CASE("a joiner woken by an admission that names another process withdraws",
          "[restart][loop][join]") {
  JobStore job;
  const RankIdentity holder = RankIdentity::ofThisProcess();
  const restart::JoinerTicket first = job.registerAs(holder);
  job.admit(1);  // names the holder; put back so after a store restart
  // The store restarted: the queue and the registry are empty again, the
  // admission (the latest) put back before the holder's identity.
  store::MemoryStore restarted;
  restart::RankRegistry registry(restarted, job.keys, kInitialWorldSize);
  const RankIdentity me = RankIdentity::ofThisProcess();
  const restart::JoinerTicket ticket =
      restart::registerJoiner(restarted, job.keys, registry, kInitialWorldSize, me);
  REQUIRE(ticket.number == first.number);
  restarted.set(job.keys.joinerAdmitted(1), *job.store.get(job.keys.joinerAdmitted(1)));
  const JoinerWait wait =
      restart::waitForAdmission(restarted, job.keys, registry, ticket, me, milliseconds(10), {});
  REQUIRE(wait.end == JoinerWait::End::kWithdrawn);
  CHECK_THAT(wait.why, Catch::Contains("its admission into iteration 1 names pid"));
}

// A number drawn twice whose first holder died: the job's ranks put its
// terminated mark back, never its identity.
TEST_CASE("a joiner whose initial rank is terminated withdraws", "[restart][loop][join]") {
  JobStore job;
  const RankIdentity me = RankIdentity::ofThisProcess();
  const restart::JoinerTicket ticket = job.registerAs(me);
  restart::protocol::markTerminated(job.store, job.keys, ticket.initialRank, "put back");
  const JoinerWait wait = job.wait(ticket, me);
  REQUIRE(wait.end == JoinerWait::End::kWithdrawn);
  CHECK_THAT(wait.why, Catch::Contains("initial rank 3 is terminated (put back)"));
}

TEST_CASE("a joiner of a job that finished is not needed", "[restart][loop][join]") {
  JobStore job;
  const RankIdentity me = RankIdentity::ofThisProcess();
  const restart::JoinerTicket ticket = job.registerAs(me);
  job.store.set(job.keys.finished(), "1");
  CHECK(job.wait(ticket, me).end == JoinerWait::End::kNotNeeded);
}

// A store on which every add and compare-and-set is applied twice, the
// reply coming from the second: a call resent after a store restart lost its
// reply (by the node proxy and by the client behind it).
class AppliedTwice final : public test::ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  int64_t add(std::string_view k, int64_t d, store::Timeout t) override {
    ForwardingStore::add(k, d, t);
    return ForwardingStore::add(k, d, t);
  }
  store::CasResult compareSet(std::string_view k, std::optional<std::string_view> e,
                              std::string_view d, store::Timeout t) override {
    ForwardingStore::compareSet(k, e, d, t);
    return ForwardingStore::compareSet(k, e, d, t);
  }
};

// Issue 34 (the same drill): a replacement's registration in flight when the
// store restarted was applied twice on the new instance (resent by the node
// proxy and by the replacement's own client): its add drew joiner 1 for
// nobody and joiner 2 for it; the restart admitted both, and the job waited a
// heartbeat timeout for the phantom. Now a registration applied twice is one.
TEST_CASE("a joiner's registration applied twice takes one number", "[restart][loop][join]") {
  auto memory = std::make_shared<store::MemoryStore>();
  AppliedTwice twice(memory);
  const restart::protocol::JobKeys keys("default");
  restart::RankRegistry registry(twice, keys, kInitialWorldSize);
  const RankIdentity me = RankIdentity::ofThisProcess();
  const restart::JoinerTicket ticket =
      restart::registerJoiner(twice, keys, registry, kInitialWorldSize, me);
  CHECK(ticket.number == 1);
  CHECK(restart::registeredJoiners(*memory, keys, 0) == 1);
  CHECK(registry.holderOf(kInitialWorldSize)->sameProcess(me));
}
