// A communicator the library did not make (the user's, or torch's), adopted
// and registered: the monitor thread polls its ncclCommGetAsyncError, and an
// error there restarts the job at once, without any call of the user's
// waiting on it; the restart revokes it and never frees it (NCCL model).
#include <dlfcn.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include <catch2/catch.hpp>

#include "nccl/api.h"
#include "resilient/restart/nccl_communicator.hpp"
#include "tests/unit/restart/comm/nccl_model.h"
#include "tests/unit/restart/loop/rank_threads.h"

using namespace resilient;
using restart::CallContext;
using std::chrono::milliseconds;

namespace {

// The model's own calls, as a user's program would make them.
struct FakeNccl {
  void* handle = dlopen(NCCL_MODEL_PATH, RTLD_NOW | RTLD_LOCAL);
  NcclModelControl& control() const {
    return *reinterpret_cast<nccl_model_control_fn>(dlsym(handle, "nccl_model_control"))();
  }
  // A ready one-rank communicator, made directly (not by the library).
  ncclComm_t makeComm() const {
    auto getId = reinterpret_cast<ncclGetUniqueId_fn>(dlsym(handle, "ncclGetUniqueId"));
    auto init = reinterpret_cast<ncclCommInitRankConfig_fn>(dlsym(handle, "ncclCommInitRankConfig"));
    auto state = reinterpret_cast<ncclCommGetAsyncError_fn>(dlsym(handle, "ncclCommGetAsyncError"));
    ncclUniqueId id;
    REQUIRE(getId(&id) == ncclSuccess);
    ncclConfig_t config;
    std::memset(&config, 0, sizeof(config));
    config.size = sizeof(config);
    config.magic = NCCL_CONFIG_MAGIC_VALUE;
    config.blocking = 0;
    ncclComm_t comm = nullptr;
    const ncclResult_t r = init(&comm, 1, id, 0, &config);
    REQUIRE((r == ncclSuccess || r == ncclInProgress));
    ncclResult_t s = ncclInProgress;
    while (s == ncclInProgress) {
      REQUIRE(state(comm, &s) == ncclSuccess);
    }
    REQUIRE(s == ncclSuccess);
    return comm;
  }
  // What the owner does at the end: the library never frees an adopted one.
  void abort(ncclComm_t comm) const {
    REQUIRE(reinterpret_cast<ncclCommAbort_fn>(dlsym(handle, "ncclCommAbort"))(comm) == ncclSuccess);
  }
  void setAsyncError(ncclComm_t comm, ncclResult_t result) const {
    reinterpret_cast<nccl_model_set_async_error_fn>(dlsym(handle, "nccl_model_set_async_error"))(
        comm, result);
  }
  // Loaded, and no communicator of an earlier test left in it.
  void fresh() {
    REQUIRE(handle != nullptr);
    control().reset();
  }
  ~FakeNccl() { dlclose(handle); }
};

// The options that make the library load the model.
restart::NcclOptions modelOptions() {
  restart::NcclOptions o;
  o.library = NCCL_MODEL_PATH;
  return o;
}

// The one rank ran again once (iteration 1) and completed.
void checkOneRestart(const std::vector<test::RankOutcome>& out) {
  REQUIRE(out.size() == 1);
  INFO(out[0].errorText());
  CHECK(!out[0].error);
  CHECK(out[0].state.iteration == 1);
}

}  // namespace

TEST_CASE("an adopted communicator's asynchronous error restarts the job at once",
          "[restart][loop][adopted]") {
  FakeNccl fake;
  fake.fresh();
  const restart::NcclOptions nccl = modelOptions();
  ncclComm_t userComm = fake.makeComm();
  std::chrono::steady_clock::time_point broken{};
  double noticedMs = -1;
  const auto out = test::runRanks(1, {}, [&](int, CallContext& ctx) {
    if (ctx.iteration() > 0) {
      return;
    }
    ctx.registerCommunicator(
        restart::NcclCommunicator::adopt(userComm, ctx.state(), "user comm", nccl));
    // The net plugin fails the user's communicator; nothing of the user's
    // waits on it: only the monitor thread can notice.
    broken = std::chrono::steady_clock::now();
    fake.setAsyncError(userComm, ncclRemoteError);
    const auto deadline = broken + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      if (ctx.cancelled()) {
        noticedMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                              broken)
                        .count();
        ctx.checkCancelled();
      }
      std::this_thread::sleep_for(milliseconds(1));
    }
  });
  checkOneRestart(out);
  CHECK(noticedMs >= 0);
  CHECK(noticedMs < 2000);  // the poll runs every 10 ms; a generous bound
  bool named = false;
  for (const auto& e : out[0].timeline) {
    named = named || (e.phase == "fault detected" &&
                      e.detail.find("asynchronous error of") != std::string::npos);
  }
  CHECK(named);
  // Revoked by the restart (NCCL 2.28.7+), never aborted or destroyed: the
  // user owns it.
  CHECK(fake.control().revokes == 1);
  CHECK(fake.control().aborts == 0);
  CHECK(fake.control().destroys == 0);
  fake.abort(userComm);  // its owner frees it
  CHECK(fake.control().liveComms == 0);
}

// GPU kit, the torch demo on NCCL: a step used the sums of an all-reduce the
// abort had cut short, because Python's interruption came after the abort.
// The interrupt hook runs first: the call is cancelled, nothing is aborted.
TEST_CASE("the interrupt hook runs before any communicator is aborted", "[restart][loop][adopted]") {
  FakeNccl fake;
  fake.fresh();
  const restart::NcclOptions nccl = modelOptions();
  ncclComm_t userComm = fake.makeComm();
  std::atomic<int> interrupts{0};
  std::atomic<int> revokesAtInterrupt{-1};
  std::atomic<int> interruptsAtAbort{-1};
  std::atomic<bool> cancelledAtInterrupt{false};
  std::atomic<CallContext*> running{nullptr};
  const auto out = test::runRanks(
      1,
      [&](int, restart::Options& o) {
        o.interrupt = [&](const restart::State&) {
          revokesAtInterrupt = fake.control().revokes.load();
          CallContext* c = running.load();
          cancelledAtInterrupt = c != nullptr && c->cancelled();
          ++interrupts;
        };
        o.abort = [&](const restart::State&) { interruptsAtAbort = interrupts.load(); };
      },
      [&](int, CallContext& ctx) {
        if (ctx.iteration() > 0) {
          return;
        }
        running = &ctx;
        ctx.registerCommunicator(
            restart::NcclCommunicator::adopt(userComm, ctx.state(), "user comm", nccl));
        fake.setAsyncError(userComm, ncclRemoteError);
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (std::chrono::steady_clock::now() < deadline) {
          ctx.checkCancelled();
          std::this_thread::sleep_for(milliseconds(1));
        }
      });
  checkOneRestart(out);
  CHECK(interrupts == 1);
  CHECK(cancelledAtInterrupt);
  CHECK(revokesAtInterrupt == 0);  // no communicator touched yet
  CHECK(fake.control().revokes == 1);
  CHECK(interruptsAtAbort == 1);   // the user's abort comes after
  fake.abort(userComm);
}
