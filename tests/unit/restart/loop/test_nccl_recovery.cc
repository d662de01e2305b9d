// The restart loop over NCCL communicators of the NCCL model (threads as
// ranks; ../comm/nccl_model.cc): what real NCCL does to a restart, from the
// training thread's side. A group left open on a rank's thread makes that
// rank leave, loudly, instead of training on its own sums; an abort that
// NCCL does not return from is bounded and the rank leaves; the survivors'
// collectives after the restart launch and add up.
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include <catch2/catch.hpp>

#include "resilient/restart/errors.hpp"
#include "resilient/restart/nccl_communicator.hpp"
#include "tests/unit/restart/comm/model_library.h"
#include "tests/unit/restart/loop/rank_threads.h"

using namespace resilient;
using restart::CallContext;
using std::chrono::milliseconds;

namespace {

restart::NcclOptions modelOptions(const char* path) {
  restart::NcclOptions o;
  o.library = path;
  o.destroyTimeout = milliseconds(2000);
  return o;
}

void* handleOf(CallContext& ctx) {
  auto* c = dynamic_cast<restart::NcclCommunicator*>(ctx.communicator("nccl"));
  REQUIRE(c != nullptr);
  return c->handle();
}

// This rank's rank + 1, summed over the communicator; -1 when it did not
// complete (never launched, or failed).
float sumOfRanks(const restart::commtest::ModelLibrary& model, CallContext& ctx) {
  void* c = handleOf(ctx);
  const float mine = static_cast<float>(ctx.state().activeRank + 1);
  float out = -1.0f;
  (void)model.allReduce(&mine, &out, 1, c);
  if (model.settle(c) != ncclSuccess || model.wait(c, 3000) != ncclSuccess) {
    return -1.0f;
  }
  return out;
}

void waitCancelled(CallContext& ctx) {
  while (!ctx.cancelled()) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  ctx.checkCancelled();
}

}  // namespace

// The GPU run's symptom: a thread inside a group nobody ended only queues its
// collectives; the survivors then trained on local sums. Here the group is
// the user's (an exception between ncclGroupStart and ncclGroupEnd, as an
// asynchronous interruption inside torch's coalescing makes one).
TEST_CASE("a rank whose thread was left inside an NCCL group leaves; the others go on",
          "[restart][loop][nccl-model]") {
  const restart::commtest::ModelLibrary model(NCCL_MODEL_PATH);
  model.control().reset();
  std::mutex mutex;
  std::vector<std::pair<int, float>> sums;  // (rank, sum) after the restart
  const auto out = test::runRanks(
      3,
      [](int, restart::Options& o) {
        o.communicators = {
            {"nccl", restart::ncclCommunicatorFactory(modelOptions(NCCL_MODEL_PATH))}};
      },
      [&](int rank, CallContext& ctx) {
        const float sum = sumOfRanks(model, ctx);
        if (ctx.iteration() == 0) {
          if (sum != 6.0f) {
            throw std::runtime_error("iteration 0: wrong sum");
          }
          if (rank == 1) {
            (void)model.groupStart();  // ... and never its ncclGroupEnd
            throw std::runtime_error("interrupted inside a group");
          }
          waitCancelled(ctx);
        }
        std::lock_guard<std::mutex> lock(mutex);
        sums.emplace_back(rank, sum);
      });
  INFO(out[1].errorText());
  CHECK_THAT(out[1].errorText(), Catch::Contains("inside an NCCL group that nobody ended"));
  for (const int r : {0, 2}) {
    INFO("rank " << r << ": " << out[static_cast<size_t>(r)].errorText());
    CHECK(!out[static_cast<size_t>(r)].error);
    CHECK(out[static_cast<size_t>(r)].state.iteration == 1);
    CHECK(out[static_cast<size_t>(r)].state.activeWorldSize == 2);
  }
  REQUIRE(sums.size() == 2);
  for (const auto& [rank, sum] : sums) {
    INFO("rank " << rank);
    CHECK(sum == 3.0f);  // active ranks 0 and 1: 1 + 2, launched
  }
  CHECK(model.control().destroys == 0);
}

// An abort NCCL does not return from (here: a CUDA graph still holds the
// communicator; NCCL's commDestroySync waits for localPersistentRefs) is
// bounded by finalizeTimeout: the rank leaves, the others restart without it.
TEST_CASE("an abort that hangs is bounded: the rank leaves, the job goes on",
          "[restart][loop][nccl-model]") {
  const restart::commtest::ModelLibrary model(NCCL_MODEL_PATH);
  model.control().reset();
  std::atomic<void*> held{nullptr};
  std::atomic<bool> done{false};
  // Whatever happens, the graph is released in the end, so that the thread
  // left inside ncclCommAbort finishes before the model goes.
  std::thread releaser([&] {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!done && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(milliseconds(10));
    }
    if (void* c = held.load()) {
      model.setGraphRefs(c, 0);
    }
  });
  const auto start = std::chrono::steady_clock::now();
  const auto out = test::runRanks(
      2,
      [](int, restart::Options& o) {
        restart::NcclOptions n = modelOptions(NCCL_MODEL_PATH);
        n.useRevoke = false;  // ncclCommAbort at the fault (as with NCCL 2.27)
        o.communicators = {{"nccl", restart::ncclCommunicatorFactory(n)}};
        o.finalizeTimeout = milliseconds(500);
      },
      [&](int rank, CallContext& ctx) {
        if (ctx.iteration() == 0) {
          if (rank == 0) {
            model.setGraphRefs(handleOf(ctx), 1);  // a captured all-reduce
            held = handleOf(ctx);
            waitCancelled(ctx);
          }
          // Rank 1 fails once the graph holds rank 0's communicator: the
          // abort starts as soon as the fault is published (no lastCallWait
          // any more), and an abort before the capture would neither hang
          // nor leave the model's communicator to the capture (a freed one).
          while (held.load() == nullptr) {
            std::this_thread::yield();
          }
          throw std::runtime_error("rank 1 fails");
        }
      });
  const auto took = std::chrono::steady_clock::now() - start;
  done = true;
  releaser.join();
  INFO(out[0].errorText());
  CHECK_THAT(out[0].errorText(), Catch::Contains("did not return within 500 ms"));
  INFO(out[1].errorText());
  CHECK(!out[1].error);
  CHECK(out[1].state.iteration == 1);
  CHECK(took < std::chrono::seconds(15));
}

// NCCL's proxy join (500 ms in NCCL, modelled as such here) is paid once
// per restart, not once per communicator: every abort, and every free,
// runs on its own thread at once; the timeline says how long each took.
TEST_CASE("communicators are aborted and freed in parallel, timed in the timeline",
          "[restart][loop][nccl-model]") {
  const restart::commtest::ModelLibrary model(NCCL_MODEL_PATH);
  for (const bool revoke : {false, true}) {
    CAPTURE(revoke);
    model.control().reset();
    model.control().proxyJoinMs = 500;
    const auto out = test::runRanks(
        2,
        [&](int, restart::Options& o) {
          restart::NcclOptions n = modelOptions(NCCL_MODEL_PATH);
          n.useRevoke = revoke;
          o.communicators = {{"a", restart::ncclCommunicatorFactory(n)},
                             {"b", restart::ncclCommunicatorFactory(n)},
                             {"c", restart::ncclCommunicatorFactory(n)}};
        },
        [&](int rank, CallContext& ctx) {
          if (ctx.iteration() == 0) {
            if (rank == 1) {
              throw std::runtime_error("rank 1 fails");
            }
            waitCancelled(ctx);
          }
        });
    for (const auto& rank : out) {
      INFO(rank.errorText());
      REQUIRE(!rank.error);
      // "3 in 512 ms (in parallel)": the number after " in ".
      auto msOf = [&](const char* phase) {
        for (const auto& e : rank.timeline) {
          if (e.phase == phase) {
            UNSCOPED_INFO(phase << ": " << e.detail);
            return std::stol(e.detail.substr(e.detail.find(" in ") + 4));
          }
        }
        return -1L;
      };
      const long aborted = msOf("communicators aborted");
      const long freed = msOf("previous communicators freed");
      CHECK(aborted >= 0);
      CHECK(freed >= 0);
      // One join's worth, not three (3 x 500 ms one after another).
      CHECK(aborted + freed < 1200);
      if (!revoke) {
        CHECK(aborted >= 450);  // ncclCommAbort joins the proxy threads itself
      }
    }
  }
}
