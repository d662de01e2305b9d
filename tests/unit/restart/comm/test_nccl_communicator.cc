// NcclCommunicator and the NCCL loader against the model of NCCL
// (nccl_model.cc, one build per version): loading and version checks,
// non-blocking creation with the id exchanged through the rendezvous,
// timeouts, errors, revoke versus abort, shrink and grow as NCCL does them
// (the child appears late; a parent that kept a transfer's error refuses),
// teardown that never leaves the thread inside a group. Ranks are threads.
#include <dlfcn.h>

#include <functional>

#include <chrono>
#include <thread>

#include "resilient/restart/nccl_communicator.hpp"
#include "restart/comm/nccl_library.h"
#include "tests/unit/restart/comm/comm_harness.h"
#include "tests/unit/restart/comm/model_library.h"

using namespace resilient;
using namespace resilient::restart;
using std::chrono::milliseconds;

namespace {

NcclModelControl& control(const char* path) {
  return commtest::ModelLibrary(path).control();
}

void setAsyncError(const char* path, void* comm, int result) {
  commtest::ModelLibrary(path).setAsyncError(comm, static_cast<ncclResult_t>(result));
}

void setProxyError(const char* path, void* comm, int result) {
  commtest::ModelLibrary(path).failTransfer(comm, static_cast<ncclResult_t>(result));
}

NcclOptions fakeOptions(const char* path = NCCL_MODEL_PATH) {
  NcclOptions o;
  o.library = path;
  o.destroyTimeout = milliseconds(2000);
  return o;
}

void requireNoErrors(const std::vector<std::exception_ptr>& errors) {
  for (size_t r = 0; r < errors.size(); ++r) {
    CAPTURE(r);
    REQUIRE(commtest::messageOf(errors[r]) == "");
  }
}

// Makes n communicators of iteration `iteration` (threads), returns them by rank.
std::vector<std::shared_ptr<NcclCommunicator>> makeAll(const std::shared_ptr<store::Store>& s,
                                                       int iteration, int n,
                                                       const NcclOptions& o) {
  std::vector<std::shared_ptr<NcclCommunicator>> comms(static_cast<size_t>(n));
  const commtest::Iteration it(s, iteration, n);
  requireNoErrors(it.run([&](int rank, commtest::RankContext& c) {
    comms[static_cast<size_t>(rank)] = NcclCommunicator::create(c.setup("nccl", milliseconds(5000)), o);
  }));
  return comms;
}

}  // namespace

TEST_CASE("the loader reports the version, the file and the optional calls", "[nccl]") {
  auto lib = comm::NcclLibrary::load(NCCL_MODEL_PATH);
  REQUIRE(lib->version().code == 22809);
  REQUIRE(lib->version().text() == "2.28.9");
  REQUIRE(lib->hasRevoke());
  REQUIRE(lib->hasShrink());
  REQUIRE_THAT(lib->path(), Catch::EndsWith("libnccl-model.so"));
  REQUIRE(comm::NcclLibrary::load(NCCL_MODEL_PATH) == lib);  // once per process
  REQUIRE_THAT(lib->describe(ncclRemoteError),
               Catch::Equals("ncclRemoteError (6): remote process exited or there was a network error"));

  auto older = comm::NcclLibrary::load(NCCL_MODEL_227_PATH);
  REQUIRE(older->version().text() == "2.27.3");
  REQUIRE(older->hasShrink());
  REQUIRE_FALSE(older->hasRevoke());  // the symbol exists there, the version is too old
}

TEST_CASE("version codes decode both ways NCCL wrote them", "[nccl]") {
  REQUIRE(comm::NcclVersion::fromCode(22809).text() == "2.28.9");
  REQUIRE(comm::NcclVersion::fromCode(2708).text() == "2.7.8");
  REQUIRE(comm::NcclVersion::fromCode(21403).atLeast(2, 14, 0));
  REQUIRE_FALSE(comm::NcclVersion::fromCode(21309).atLeast(2, 14, 0));
  REQUIRE(comm::NcclVersion::fromCode(30001).atLeast(2, 28, 7));
}

TEST_CASE("unusable libraries are refused with the reason", "[nccl]") {
  REQUIRE_THROWS_WITH(comm::NcclLibrary::load("/nonexistent/libnccl.so.2"),
                      Catch::Contains("cannot load '/nonexistent/libnccl.so.2'"));
  REQUIRE_THROWS_WITH(comm::NcclLibrary::load("libc.so.6"),
                      Catch::Contains("no ncclGetVersion: not an NCCL library"));
  REQUIRE_THROWS_WITH(comm::NcclLibrary::load(NCCL_MODEL_OLD_PATH),
                      Catch::Contains("NCCL 2.12.3") && Catch::Contains("too old") &&
                          Catch::Contains(">= 2.14"));
  REQUIRE_THROWS_WITH(comm::NcclLibrary::load(NCCL_MODEL_INCOMPLETE_PATH),
                      Catch::Contains("NCCL 2.20.5") && Catch::Contains("lacks ncclCommFinalize"));
  // And through the factory, before any rendezvous.
  const commtest::Iteration it(std::make_shared<store::MemoryStore>(), 0, 1);
  commtest::RankContext c = it.context(0);
  REQUIRE_THROWS_AS(ncclCommunicatorFactory(fakeOptions(NCCL_MODEL_OLD_PATH))(
                        c.setup("x", milliseconds(100))),
                    RestartError);
}

TEST_CASE("creation: rank 0's id reaches everyone, non-blocking, polled to the end", "[nccl]") {
  NcclModelControl& fake = control(NCCL_MODEL_PATH);
  fake.reset();
  fake.initDelayMs = 20;
  const int live = fake.liveComms.load();
  auto s = std::make_shared<store::MemoryStore>();
  {
    auto comms = makeAll(s, 4, 3, fakeOptions());
    REQUIRE(fake.uniqueIds == 1);
    REQUIRE(fake.inits == 3);
    REQUIRE(fake.badConfigs == 0);
    REQUIRE(fake.liveComms == live + 3);
    for (int r = 0; r < 3; ++r) {
      auto& c = comms[static_cast<size_t>(r)];
      REQUIRE(c->handle() != nullptr);
      REQUIRE(c->rank() == r);
      REQUIRE(c->size() == 3);
      REQUIRE_FALSE(c->shrunk());
      REQUIRE(c->ncclVersion() == "2.28.9");
      REQUIRE_FALSE(c->asyncError());
      REQUIRE_THAT(c->describe(), Catch::Contains("nccl comm 'nccl' iteration 4 rank " +
                                                  std::to_string(r) + "/3") &&
                                      Catch::Contains("NCCL 2.28.9, live"));
    }
  }
  // Healthy communicators are finalized, then aborted (never destroyed).
  REQUIRE(fake.finalizes == 3);
  REQUIRE(fake.destroys == 0);
  REQUIRE(fake.aborts == 3);
  REQUIRE(fake.liveComms == live);
}

TEST_CASE("a creation that does not finish in time is aborted and times out", "[nccl]") {
  NcclModelControl& fake = control(NCCL_MODEL_PATH);
  fake.reset();
  fake.initHang = true;
  const int live = fake.liveComms.load();
  const commtest::Iteration it(std::make_shared<store::MemoryStore>(), 0, 2);
  const auto start = std::chrono::steady_clock::now();
  auto errors = it.run([&](int, commtest::RankContext& c) {
    (void)NcclCommunicator::create(c.setup("slow", milliseconds(200)), fakeOptions());
  });
  REQUIRE(std::chrono::steady_clock::now() - start < milliseconds(3000));
  for (auto& e : errors) {
    REQUIRE_THROWS_AS(std::rethrow_exception(e), restart::TimeoutError);
    REQUIRE_THAT(commtest::messageOf(e), Catch::Contains("ncclCommInitRankConfig did not complete "
                                                     "within 200 ms; aborted"));
  }
  REQUIRE(fake.aborts == 2);
  REQUIRE(fake.liveComms == live);
  // NCCL's own leak when an init is aborted before its connections were
  // accepted (transport/net.cc closes a listen comm only after accept): none
  // here, every member arrived.
  REQUIRE(fake.leakedListens == 0);
}

TEST_CASE("a member that never comes: the creation times out, NCCL leaks its listen comms",
          "[nccl]") {
  NcclModelControl& fake = control(NCCL_MODEL_PATH);
  fake.reset();
  const int live = fake.liveComms.load();
  auto s = std::make_shared<store::MemoryStore>();
  const commtest::Iteration it(s, 0, 2);
  auto errors = it.run([&](int rank, commtest::RankContext& c) {
    if (rank == 1) {
      (void)c.rendezvous->lookup("nccl/nccl-unique-id", milliseconds(2000));  // then gone
      return;
    }
    (void)NcclCommunicator::create(c.setup("nccl", milliseconds(300)), fakeOptions());
  });
  REQUIRE_THAT(commtest::messageOf(errors[0]),
               Catch::Contains("ncclCommInitRankConfig did not complete within 300 ms; aborted"));
  CHECK(fake.aborts == 1);
  CHECK(fake.leakedListens == 1);
  CHECK(fake.liveComms == live);
}

TEST_CASE("NCCL's refusal is a RestartError with its result and last error", "[nccl]") {
  NcclModelControl& fake = control(NCCL_MODEL_PATH);
  const commtest::Iteration it(std::make_shared<store::MemoryStore>(), 0, 2);
  SECTION("at the call") {
    fake.reset();
    fake.initResult = ncclUnhandledCudaError;
    auto errors = it.run([&](int, commtest::RankContext& c) {
      (void)NcclCommunicator::create(c.setup("nogpu", milliseconds(2000)), fakeOptions());
    });
    for (auto& e : errors) {
      REQUIRE_THAT(commtest::messageOf(e),
                   Catch::Contains("ncclCommInitRankConfig failed: ncclUnhandledCudaError (1): "
                                   "unhandled cuda error") &&
                       Catch::Contains("; NCCL: Model: ncclCommInitRankConfig failed as scripted"));
    }
  }
  SECTION("asynchronously") {
    fake.reset();
    fake.readyResult = ncclSystemError;
    const int live = fake.liveComms.load();
    auto errors = it.run([&](int, commtest::RankContext& c) {
      (void)NcclCommunicator::create(c.setup("async", milliseconds(2000)), fakeOptions());
    });
    for (auto& e : errors) {
      REQUIRE_THAT(commtest::messageOf(e), Catch::Contains("ncclSystemError (2)"));
    }
    REQUIRE(fake.liveComms == live);
  }
  SECTION("no unique id: the other ranks learn why at once") {
    fake.reset();
    fake.uniqueIdResult = ncclSystemError;
    const auto start = std::chrono::steady_clock::now();
    auto errors = it.run([&](int, commtest::RankContext& c) {
      (void)NcclCommunicator::create(c.setup("noid", milliseconds(5000)), fakeOptions());
    });
    REQUIRE(std::chrono::steady_clock::now() - start < milliseconds(2000));
    REQUIRE_THAT(commtest::messageOf(errors[0]), Catch::Contains("ncclGetUniqueId failed"));
    REQUIRE_THAT(commtest::messageOf(errors[1]),
                 Catch::Contains("no NCCL unique id from active rank 0") &&
                     Catch::Contains("ncclGetUniqueId failed"));
  }
}

TEST_CASE("abort revokes once, from any thread; the handle stays valid", "[nccl]") {
  NcclModelControl& fake = control(NCCL_MODEL_PATH);
  fake.reset();
  auto comms = makeAll(std::make_shared<store::MemoryStore>(), 0, 2, fakeOptions());
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      for (auto& c : comms) {
        c->abort();
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  REQUIRE(fake.revokes == 2);
  REQUIRE(fake.aborts == 0);
  REQUIRE(comms[0]->handle() != nullptr);
  REQUIRE_THAT(comms[0]->describe(), Catch::Contains("revoked"));
  REQUIRE_FALSE(comms[0]->asyncError());
  comms.clear();
  // Revoked: aborted once the revoke settled, never finalized or destroyed.
  REQUIRE(fake.aborts == 2);
  REQUIRE(fake.destroys == 0);
  REQUIRE(fake.finalizes == 0);
}

TEST_CASE("a revoked communicator whose NCCL state is an error is aborted, never destroyed",
          "[nccl]") {
  // The GPU kit's demo (NCCL 2.28.9): after a restart, ncclCommDestroy of the
  // revoked communicator returned the proxy's ncclRemoteError from inside
  // the group it had begun (NCCL's log: "init.cc:2381 -> 6"); every later
  // ncclAllReduce of that thread then joined a group that never ended and
  // returned at once, unlaunched, and the survivors trained on their own
  // sums. ncclCommAbort ends its group whatever the state.
  NcclModelControl& fake = control(NCCL_MODEL_PATH);
  fake.reset();
  const int liveBefore = fake.liveComms;
  auto comms = makeAll(std::make_shared<store::MemoryStore>(), 0, 2, fakeOptions());
  for (auto& c : comms) {
    setProxyError(NCCL_MODEL_PATH, c->handle(), ncclRemoteError);  // a transfer failed
    c->abort();                                                   // revoked
  }
  REQUIRE(fake.revokes == 2);
  comms.clear();
  CHECK(fake.leakedGroups == 0);
  CHECK(fake.destroys == 0);
  CHECK(fake.aborts == 2);
  CHECK(fake.liveComms == liveBefore);
}

TEST_CASE("without revoke (NCCL 2.27), or when told, abort is ncclCommAbort", "[nccl]") {
  for (const char* path : {NCCL_MODEL_227_PATH, NCCL_MODEL_PATH}) {
    CAPTURE(path);
    NcclModelControl& fake = control(path);
    fake.reset();
    NcclOptions o = fakeOptions(path);
    o.useRevoke = false;
    if (std::string(path) == NCCL_MODEL_227_PATH) {
      o.useRevoke = true;  // asked for, not available
    }
    const int live = fake.liveComms.load();
    auto comms = makeAll(std::make_shared<store::MemoryStore>(), 0, 2, o);
    for (auto& c : comms) {
      c->abort();
      c->abort();
      REQUIRE(c->handle() == nullptr);
      REQUIRE_THAT(c->describe(), Catch::Contains("aborted"));
    }
    REQUIRE(fake.aborts == 2);
    REQUIRE(fake.revokes == 0);
    comms.clear();
    REQUIRE(fake.destroys == 0);
    REQUIRE(fake.liveComms == live);
  }
}

TEST_CASE("asyncError reports NCCL's error with its last error text", "[nccl]") {
  NcclModelControl& fake = control(NCCL_MODEL_PATH);
  fake.reset();
  auto comms = makeAll(std::make_shared<store::MemoryStore>(), 0, 1, fakeOptions());
  REQUIRE_FALSE(comms[0]->asyncError());
  setAsyncError(NCCL_MODEL_PATH, comms[0]->handle(), ncclRemoteError);
  const auto e = comms[0]->asyncError();
  REQUIRE(e);
  REQUIRE_THAT(*e, Catch::Contains("ncclRemoteError (6)") &&
                       Catch::Contains("NCCL: Model: an asynchronous error 6"));
  // Finalize fails on a broken communicator: the destructor falls back to abort.
  comms.clear();
  REQUIRE(fake.aborts == 1);
}

TEST_CASE("an iteration that only removed ranks shrinks the revoked communicator", "[nccl]") {
  NcclModelControl& fake = control(NCCL_MODEL_PATH);
  fake.reset();
  auto s = std::make_shared<store::MemoryStore>();
  auto old = makeAll(s, 0, 4, fakeOptions());
  for (auto& c : old) {
    c->abort();  // revoke
  }
  // Old rank 2 is gone: old ranks 0, 1, 3 become 0, 1, 2.
  const int oldRankOf[3] = {0, 1, 3};
  std::vector<std::shared_ptr<NcclCommunicator>> shrunk(3);
  const commtest::Iteration it(s, 1, 3);
  requireNoErrors(it.run([&](int rank, commtest::RankContext& c) {
    shrunk[static_cast<size_t>(rank)] = NcclCommunicator::create(
        c.setup("nccl", milliseconds(5000), old[static_cast<size_t>(oldRankOf[rank])], {2}, true),
        fakeOptions());
  }));
  REQUIRE(fake.shrinks == 3);
  REQUIRE(fake.inits == 4);  // only the first iteration's
  REQUIRE(fake.lastShrinkFlags == NCCL_SHRINK_ABORT);
  REQUIRE(fake.lastShrinkCount == 1);
  REQUIRE(fake.lastShrinkFirst == 2);
  REQUIRE(fake.badConfigs == 0);
  for (auto& c : shrunk) {
    REQUIRE(c->shrunk());
    REQUIRE(c->handle() != nullptr);
  }
}

TEST_CASE("shrink falls back to a full init unless every member can shrink", "[nccl]") {
  NcclModelControl& fake = control(NCCL_MODEL_PATH);
  fake.reset();
  auto s = std::make_shared<store::MemoryStore>();
  auto old = makeAll(s, 0, 3, fakeOptions());
  for (auto& c : old) {
    c->abort();
  }
  // Old rank 2 gone; member 1's previous is missing altogether (a new process).
  std::vector<std::shared_ptr<NcclCommunicator>> next(2);
  const commtest::Iteration it(s, 1, 2);
  requireNoErrors(it.run([&](int rank, commtest::RankContext& c) {
    CommunicatorPtr previous = rank == 0 ? CommunicatorPtr(old[0]) : nullptr;
    next[static_cast<size_t>(rank)] = NcclCommunicator::create(
        c.setup("nccl", milliseconds(5000), previous, {2}, true), fakeOptions());
  }));
  REQUIRE(fake.shrinks == 0);
  REQUIRE(fake.inits == 5);
  for (auto& c : next) {
    REQUIRE_FALSE(c->shrunk());
  }
}

namespace {

// Iteration 1 of a job whose iteration 0 had 4 members: old rank 2 is gone
// and a spare joins as the last rank (new ranks 0, 1, 2 from old 0, 1, 3;
// rank 3 the spare). Returns the communicators by new rank; `previousOf`
// gives each member's previous communicator (nullptr: none).
std::vector<std::shared_ptr<NcclCommunicator>> shrinkAndJoin(
    const std::shared_ptr<store::Store>& s, const NcclOptions& o,
    const std::function<CommunicatorPtr(int)>& previousOf, std::vector<std::string>* errors,
    std::vector<std::vector<std::string>>* records = nullptr) {
  std::vector<std::shared_ptr<NcclCommunicator>> next(4);
  if (records != nullptr) {
    records->assign(4, {});
  }
  const commtest::Iteration it(s, 1, 4);
  const auto raised = it.run([&](int rank, commtest::RankContext& c) {
    next[static_cast<size_t>(rank)] = NcclCommunicator::create(
        c.setup("nccl", milliseconds(3000), previousOf(rank), {2}, false, {3}), o);
    if (records != nullptr) {
      (*records)[static_cast<size_t>(rank)] = *c.records;
    }
  });
  errors->clear();
  for (const auto& e : raised) {
    errors->push_back(commtest::messageOf(e));
  }
  return next;
}

}  // namespace

TEST_CASE("a spare joining as the last rank: shrink, then grow (NCCL 2.29, 2.30, 2.31), timed",
          "[nccl][grow]") {
  for (const char* path : {NCCL_MODEL_229_PATH, NCCL_MODEL_230_PATH, NCCL_MODEL_231_PATH}) {
    CAPTURE(path);
    NcclModelControl& fake = control(path);
    fake.reset();
    auto s = std::make_shared<store::MemoryStore>();
    const NcclOptions o = fakeOptions(path);
    auto old = makeAll(s, 0, 4, o);
    for (auto& c : old) {
      c->abort();  // revoke
    }
    const int oldRankOf[3] = {0, 1, 3};
    std::vector<std::string> errors;
    std::vector<std::vector<std::string>> records;
    auto next = shrinkAndJoin(
        s, o,
        [&](int r) { return r < 3 ? CommunicatorPtr(old[static_cast<size_t>(oldRankOf[r])]) : nullptr; },
        &errors, &records);
    for (const auto& e : errors) {
      REQUIRE(e == "");
    }
    CHECK(fake.shrinks == 3);
    CHECK(fake.growIds == 1);    // the root (new rank 0) made the id
    CHECK(fake.grows == 3);      // the survivors grew their shrunk communicator
    CHECK(fake.growJoins == 1);  // the spare joined with the id
    CHECK(fake.lastGrowRanks == 4);
    CHECK(fake.badGrows == 0);
    CHECK(fake.badConfigs == 0);
    CHECK(fake.inits == 4);  // only iteration 0's
    // NCCL's jobs stored the shrunk children (3) and the grown ones (4)
    // after the calls had returned.
    CHECK(fake.lateStores == 7);
    for (auto& c : next) {
      REQUIRE(c->grown());
      REQUIRE(c->handle() != nullptr);
    }
    // The path and each call's time are in the timeline.
    std::string joined;
    for (const auto& line : records[0]) {
      joined += line + "\n";
    }
    CHECK_THAT(joined, Catch::Contains("nccl path: ncclCommShrink + ncclCommGrow"));
    CHECK_THAT(joined, Catch::Contains("nccl call: ncclCommShrink "));
    CHECK_THAT(joined, Catch::Contains("nccl call: ncclCommGrow "));
    CHECK_THAT(joined, Catch::Contains(" ms"));
    // The shrunk intermediates were finalized and aborted (3); the revoked
    // parents and the gone rank's communicator are aborted once freed.
    CHECK(fake.aborts == 3);
    old.clear();
    CHECK(fake.aborts == 7);
    CHECK(fake.destroys == 0);
    CHECK(fake.leakedGroups == 0);
    next.clear();
    CHECK(fake.liveComms == 0);
  }
}

TEST_CASE("grow falls back to a full init unless every member can grow", "[nccl][grow]") {
  auto s = std::make_shared<store::MemoryStore>();
  std::vector<std::string> errors;
  SECTION("NCCL 2.28 has no grow") {
    NcclModelControl& fake = control(NCCL_MODEL_PATH);
    fake.reset();
    auto old = makeAll(s, 0, 4, fakeOptions());
    for (auto& c : old) {
      c->abort();
    }
    const int oldRankOf[3] = {0, 1, 3};
    auto next = shrinkAndJoin(
        s, fakeOptions(),
        [&](int r) { return r < 3 ? CommunicatorPtr(old[static_cast<size_t>(oldRankOf[r])]) : nullptr; },
        &errors);
    for (const auto& e : errors) {
      REQUIRE(e == "");
    }
    CHECK(fake.shrinks == 0);
    CHECK(fake.grows == 0);
    CHECK(fake.inits == 8);
  }
  SECTION("a survivor without its previous communicator") {
    NcclModelControl& fake = control(NCCL_MODEL_229_PATH);
    fake.reset();
    const NcclOptions o = fakeOptions(NCCL_MODEL_229_PATH);
    auto old = makeAll(s, 0, 4, o);
    for (auto& c : old) {
      c->abort();
    }
    auto next = shrinkAndJoin(
        s, o, [&](int r) { return r == 0 ? CommunicatorPtr(old[0]) : nullptr; }, &errors);
    for (const auto& e : errors) {
      REQUIRE(e == "");
    }
    CHECK(fake.grows == 0);
    CHECK(fake.growJoins == 0);
    CHECK(fake.inits == 8);
  }
}

TEST_CASE("every call of the grow path failing or hanging ends the creation, bounded",
          "[nccl][grow]") {
  NcclModelControl& fake = control(NCCL_MODEL_229_PATH);
  auto s = std::make_shared<store::MemoryStore>();
  const NcclOptions o = fakeOptions(NCCL_MODEL_229_PATH);
  const int oldRankOf[3] = {0, 1, 3};
  struct Case {
    const char* what;
    std::function<void()> script;
    const char* message;  // what every survivor's error says
  };
  const std::vector<Case> cases = {
      {"ncclCommShrink hangs", [&] { fake.initHang = true; }, "ncclCommShrink did not complete"},
      {"ncclCommGetUniqueId fails", [&] { fake.growIdResult = ncclSystemError; },
       "ncclCommGetUniqueId failed"},
      {"ncclCommGrow fails", [&] { fake.growResult = ncclRemoteError; }, "ncclCommGrow failed"},
      {"ncclCommGrow hangs", [&] { fake.growHang = true; }, "ncclCommGrow did not complete"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    fake.reset();
    auto old = makeAll(s, 0, 4, o);
    for (auto& comm : old) {
      comm->abort();
    }
    c.script();
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::string> errors;
    auto next = shrinkAndJoin(
        s, o, [&](int r) { return r < 3 ? CommunicatorPtr(old[static_cast<size_t>(oldRankOf[r])]) : nullptr; },
        &errors);
    // Within the creation's bound (3 s) and a margin; never a hang.
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
    int said = 0;
    for (const auto& e : errors) {
      REQUIRE_FALSE(e.empty());  // nobody got a communicator
      said += e.find(c.message) != std::string::npos ? 1 : 0;
    }
    CHECK(said >= 1);
    CHECK(fake.destroys == 0);  // nothing half-made is destroyed: aborted
    old.clear();
    next.clear();
    CHECK(fake.liveComms == 0);  // everything made was freed
    s = std::make_shared<store::MemoryStore>();
  }
}

TEST_CASE("a shrink that fails or hangs ends the creation, bounded, the parent aborted",
          "[nccl]") {
  NcclModelControl& fake = control(NCCL_MODEL_PATH);
  struct Case {
    const char* what;
    bool hang;
    int ready;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"the shrunk communicator reports an error", false, ncclSystemError, "ncclCommShrink failed"},
      {"ncclCommShrink never completes", true, ncclSuccess, "ncclCommShrink did not complete"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    fake.reset();
    auto s = std::make_shared<store::MemoryStore>();
    auto old = makeAll(s, 0, 3, fakeOptions());
    for (auto& comm : old) {
      comm->abort();
    }
    fake.initHang = c.hang;
    fake.readyResult = c.ready;
    const int oldRankOf[2] = {0, 2};
    const auto start = std::chrono::steady_clock::now();
    const commtest::Iteration it(s, 1, 2);
    const auto errors = it.run([&](int rank, commtest::RankContext& ctx) {
      (void)NcclCommunicator::create(
          ctx.setup("nccl", milliseconds(1000), old[static_cast<size_t>(oldRankOf[rank])], {1},
                    true),
          fakeOptions());
    });
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(8));
    for (const auto& e : errors) {
      CHECK_THAT(commtest::messageOf(e), Catch::Contains(c.message));
    }
    CHECK(fake.shrinks == 2);
    old.clear();
    // Every parent aborted (a child left behind by a job that ended late
    // with it), nothing destroyed, nothing left.
    CHECK(fake.destroys == 0);
    CHECK(fake.leakedGroups == 0);
    CHECK(fake.liveComms == 0);
  }
}

namespace {

// The paths of every model build that has a revoke (and so a shrink of a
// revoked communicator).
std::vector<const char*> revokeVersions() {
  return {NCCL_MODEL_PATH, NCCL_MODEL_229_PATH, NCCL_MODEL_230_PATH, NCCL_MODEL_231_PATH};
}

// Every member of `comms` all-reduces its rank + 1 (rank threads); returns
// what each got (-1: the call failed or never completed).
std::vector<float> allReduceRanks(const commtest::ModelLibrary& model,
                                  const std::vector<std::shared_ptr<NcclCommunicator>>& comms) {
  std::vector<float> got(comms.size(), -1.0f);
  std::vector<std::thread> threads;
  for (size_t r = 0; r < comms.size(); ++r) {
    threads.emplace_back([&, r] {
      void* c = comms[r]->handle();
      const float mine = static_cast<float>(comms[r]->rank() + 1);
      float out = -1.0f;
      const ncclResult_t called = model.allReduce(&mine, &out, 1, c);
      if ((called == ncclSuccess || called == ncclInProgress) && model.settle(c) == ncclSuccess &&
          model.wait(c, 3000) == ncclSuccess) {
        got[r] = out;
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  return got;
}

}  // namespace

// Finding 1 of the GPU run's review: a non-blocking ncclCommShrink returns
// ncclSuccess with *newcomm still NULL; the child is stored later by NCCL's
// thread, through the caller's pointer. Polling that NULL child gave
// ncclInvalidArgument, the creation threw, and NCCL then wrote into the
// dead stack slot.
TEST_CASE("a shrink's child appears when NCCL's job ends: polled on the parent, every version",
          "[nccl][model]") {
  for (const char* path : revokeVersions()) {
    CAPTURE(path);
    const commtest::ModelLibrary model(path);
    NcclModelControl& fake = model.control();
    fake.reset();
    fake.initDelayMs = 30;  // the child's job outlives the call
    auto s = std::make_shared<store::MemoryStore>();
    auto old = makeAll(s, 0, 4, fakeOptions(path));
    for (auto& c : old) {
      c->abort();
    }
    const int oldRankOf[3] = {0, 1, 3};
    std::vector<std::shared_ptr<NcclCommunicator>> shrunk(3);
    const commtest::Iteration it(s, 1, 3);
    const auto errors = it.run([&](int rank, commtest::RankContext& c) {
      shrunk[static_cast<size_t>(rank)] = NcclCommunicator::create(
          c.setup("nccl", milliseconds(5000), old[static_cast<size_t>(oldRankOf[rank])], {2}, true),
          fakeOptions(path));
    });
    requireNoErrors(errors);
    CHECK(fake.shrinks == 3);
    CHECK(fake.lateStores == 3);
    CHECK(fake.inits == 4);
    for (auto& c : shrunk) {
      REQUIRE(c->shrunk());
      REQUIRE(c->handle() != nullptr);
    }
    // The shrunk communicator works: 1 + 2 + 3.
    for (const float v : allReduceRanks(model, shrunk)) {
      CHECK(v == 6.0f);
    }
    shrunk.clear();
    old.clear();
    CHECK(fake.liveComms == 0);
  }
}

// Finding 2: ncclCommInitChildComm calls ncclCommEnsureReady(parent), which
// returns the proxy's error of the failed transfer, kept through the revoke:
// after a real fault the neighbours of the dead rank cannot shrink. The
// members agree on a full init instead, in the same restart, nobody blamed.
TEST_CASE("after a real fault the members re-initialise in the same restart, every version",
          "[nccl][model]") {
  for (const char* path : revokeVersions()) {
    CAPTURE(path);
    const commtest::ModelLibrary model(path);
    NcclModelControl& fake = model.control();
    fake.reset();
    auto s = std::make_shared<store::MemoryStore>();
    auto old = makeAll(s, 0, 4, fakeOptions(path));
    for (const float v : allReduceRanks(model, old)) {
      CHECK(v == 10.0f);
    }
    // Rank 2 dies; its neighbours' transfers fail (what our net plugin
    // reports in NCCL's proxy); everyone's communicator is revoked.
    model.failTransfer(old[1]->handle(), ncclRemoteError);
    model.failTransfer(old[3]->handle(), ncclRemoteError);
    for (const int r : {0, 1, 3}) {
      old[static_cast<size_t>(r)]->abort();
    }
    const int oldRankOf[3] = {0, 1, 3};
    std::vector<std::shared_ptr<NcclCommunicator>> next(3);
    std::vector<std::vector<std::string>> records(3);
    const commtest::Iteration it(s, 1, 3);
    const auto errors = it.run([&](int rank, commtest::RankContext& c) {
      next[static_cast<size_t>(rank)] = NcclCommunicator::create(
          c.setup("nccl", milliseconds(3000), old[static_cast<size_t>(oldRankOf[rank])], {2}, true),
          fakeOptions(path));
      records[static_cast<size_t>(rank)] = *c.records;
    });
    requireNoErrors(errors);
    CHECK(fake.shrinks == 0);
    CHECK(fake.inits == 7);
    std::string timeline;
    for (const auto& line : records[1]) {
      timeline += line + "\n";
    }
    CHECK_THAT(timeline, Catch::Contains("nccl path: ncclCommInitRankConfig") &&
                             Catch::Contains("ncclRemoteError") &&
                             Catch::Contains("NCCL would refuse to shrink it"));
    for (const float v : allReduceRanks(model, next)) {
      CHECK(v == 6.0f);
    }
    next.clear();
    old.clear();
    CHECK(fake.leakedGroups == 0);
    CHECK(fake.liveComms == 0);
  }
}

// Finding 3: ncclCommDestroy begins a group and returns from inside it when
// the communicator is not ready or carries an error; every later collective
// of that thread then only joins the group, unlaunched (the GPU run's
// "opCount 0"). An error that arrives just after the last poll was enough.
TEST_CASE("teardown never leaves the thread inside a group, whatever the state", "[nccl][model]") {
  const commtest::ModelLibrary model(NCCL_MODEL_PATH);
  NcclModelControl& fake = model.control();
  struct Case {
    const char* what;
    std::function<void(NcclCommunicator&)> before;
  };
  const std::vector<Case> cases = {
      {"healthy", [](NcclCommunicator&) {}},
      {"an error arriving just after the last poll",
       [&](NcclCommunicator&) { fake.lateErrorAfterReads = 0; }},
      {"revoked after a failed transfer",
       [&](NcclCommunicator& c) {
         model.failTransfer(c.handle(), ncclRemoteError);
         c.abort();
       }},
      {"in error", [&](NcclCommunicator& c) { model.setAsyncError(c.handle(), ncclSystemError); }},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    fake.reset();
    auto s = std::make_shared<store::MemoryStore>();
    auto comms = makeAll(s, 0, 1, fakeOptions());
    c.before(*comms[0]);
    comms.clear();  // freed on this thread
    CHECK(fake.destroys == 0);
    CHECK(fake.leakedGroups == 0);
    // This thread's next collective launches.
    auto next = makeAll(s, 1, 1, fakeOptions());
    const float one = 1.0f;
    float out = 0.0f;
    (void)model.allReduce(&one, &out, 1, next[0]->handle());
    (void)model.settle(next[0]->handle());
    CHECK(model.opCount(next[0]->handle()) == 1);
    CHECK(model.groupEnd() == ncclInvalidUsage);  // depth 0
    next.clear();
    CHECK(fake.liveComms == 0);
  }
}

TEST_CASE("checkThread finds a group left open on this thread, and closes it", "[nccl][model]") {
  const commtest::ModelLibrary model(NCCL_MODEL_PATH);
  model.control().reset();
  auto comms = makeAll(std::make_shared<store::MemoryStore>(), 0, 1, fakeOptions());
  CHECK_FALSE(comms[0]->checkThread());
  REQUIRE(model.groupStart() == ncclSuccess);  // a user's group, never ended
  const auto finding = comms[0]->checkThread();
  REQUIRE(finding);
  CHECK_THAT(*finding, Catch::Contains("inside an NCCL group that nobody ended") &&
                           Catch::Contains("ncclSuccess"));
  CHECK_FALSE(comms[0]->checkThread());  // the probe ended it
}

// The net plugin is dlclose'd when NCCL frees its last communicator, unless
// NCCL_NET_PLUGIN_REF_COUNT raised the count first (NCCL: plugin/net.cc);
// our blackbox and liveness go with it. The library pins it when it loads
// NCCL (in the model the count is read at the first communicator, as NCCL
// reads it once).
TEST_CASE("the net plugin stays loaded when every communicator was freed", "[nccl][model]") {
  const commtest::ModelLibrary model(NCCL_MODEL_231_PATH);  // only this test uses this build's plugin
  NcclModelControl& fake = model.control();
  fake.reset();
  NcclOptions o = fakeOptions(NCCL_MODEL_231_PATH);
  o.useRevoke = false;  // aborted at once: nothing holds the plugin between iterations
  auto s = std::make_shared<store::MemoryStore>();
  auto comms = makeAll(s, 0, 2, o);
  const int loads = fake.pluginLoads;
  for (auto& c : comms) {
    c->abort();
  }
  comms.clear();
  auto next = makeAll(s, 1, 2, o);
  CHECK(fake.pluginUnloads == 0);
  CHECK(fake.pluginLoads == loads);
  next.clear();
}
