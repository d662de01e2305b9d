// Who is who in the job (restart/loop/job/rank_registry.h): claims, and
// reading the registry from the threads that publish faults.
#include <memory>
#include <stdexcept>

#include <catch2/catch.hpp>

#include "resilient/restart/errors.hpp"
#include "restart/loop/job/rank_registry.h"
#include "restart/protocol/job_keys.h"
#include "store/errors.h"
#include "store/memory_store.h"
#include "tests/support/forwarding_store.h"

using namespace resilient;
using restart::RankIdentity;

namespace {

// A store that stops answering once told to.
class Unreachable final : public test::ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  bool gone = false;

 protected:
  void onCall() override {
    if (gone) {
      throw store::TimeoutError("multiGet on the test's store: no reply within 1500 ms");
    }
  }
};

}  // namespace

TEST_CASE("a claimed rank is found by its process; another's claim is refused",
          "[restart][registry]") {
  store::MemoryStore memory;
  const restart::protocol::JobKeys keys("default");
  restart::RankRegistry registry(memory, keys, 2);
  const RankIdentity first = RankIdentity::ofThisProcess();
  registry.claim(1, first);
  CHECK(registry.find(first.host, first.pid) == 1);
  CHECK(registry.find(first.host, first.pid + 1) == -1);
  const RankIdentity other = RankIdentity::ofThisProcess();
  CHECK(registry.tryClaim(1, other)->sameProcess(first));
  CHECK_FALSE(registry.tryClaim(1, first));  // a claim sent again is ours
  CHECK_THROWS_AS(registry.claim(1, other), restart::ConfigError);
  CHECK_FALSE(registry.replace(1, other, other));
  CHECK(registry.holderOf(1)->sameProcess(first));
}

// The agent drill with the store killed 5 ms after a SIGKILL: the monitor
// thread, naming the culprit of a plugin fault, read the registry from a
// store that did not answer; the TimeoutError ended the survivor (terminate,
// SIGABRT). Now the fault goes out without a culprit.
TEST_CASE("a registry whose store does not answer names no culprit, without throwing",
          "[restart][registry]") {
  auto memory = std::make_shared<store::MemoryStore>();
  Unreachable store(memory);
  const restart::protocol::JobKeys keys("default");
  restart::RankRegistry registry(store, keys, 2);
  registry.publish(0, RankIdentity::ofThisProcess());
  store.gone = true;
  int found = 0;
  CHECK_NOTHROW(found = registry.find("elsewhere", 42));
  CHECK(found == -1);
}
