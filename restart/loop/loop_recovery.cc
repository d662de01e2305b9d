#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/log.h"
#include "resilient/restart/health.hpp"
#include "restart/comm/store_rendezvous.h"
#include "restart/hooks/bounded_call.h"
#include "restart/loop/job/behind_ranks.h"
#include "restart/loop/job/culprits.h"
#include "restart/loop/job/joiners.h"
#include "restart/loop/loop.h"
#include "restart/loop/sliced_wait.h"
#include "restart/loop/text/exception_text.h"
#include "restart/monitor/spawn.h"
#include "restart/protocol/terminated_ranks.h"
#include "store/client_options.h"
#include "store/errors.h"
#include "store/open_store.h"
#include "store/prefix_view.h"
#include "store/tcp/server.h"

// The loop's recovery after a fault: abort the iteration, publish, run the
// hooks within their bounds, settle the culprits and decide what comes next.
namespace resilient::restart {

using protocol::FaultReason;
using protocol::FaultRecord;
using protocol::RankPhase;
using std::chrono::milliseconds;

namespace {

// A hook the monitor thread runs during the abort: its failure is warned
// about, never stops the abort.
void runAbortHook(const char* which, const std::function<void(const State&)>& hook,
                  const State& state) noexcept {
  if (!hook) {
    return;
  }
  try {
    hook(state);
  } catch (const std::exception& e) {
    RES_WARN(log::kRestart, "restart: the %s hook failed: %s", which, e.what());
  } catch (...) {
    RES_WARN(log::kRestart, "restart: the %s hook threw a non-standard exception", which);
  }
}

}  // namespace

void Loop::abortIteration() noexcept {
  const int k = state_.iteration;
  timeline_.recordAt(interruption_->raisedNs(), k, "fault detected", interruption_->reason());
  timeline_.record(k, "abort begun");
  // The function first: an abort releases a collective in flight with its
  // buffer half summed (NCCL: ncclCommAbort ends the kernel; torch's work
  // then completes without an error where its watchdog's error handling is
  // off, nccl_resilient.distributed.nccl_settings), and a function still
  // running would take it for a result (the GPU kit's torch demo logged a
  // step's loss from such a sum).
  runAbortHook("interrupt", options_.interrupt, state_);
  blackbox_->setFailFast(true);
  std::vector<CommunicatorPtr> targets;
  {
    std::lock_guard<std::mutex> lock(commsMutex_);
    if (creatingAbort_) {
      creatingAbort_();  // a creation under way (CommunicatorSetup::abortWith)
    }
    targets = communicatorsLocked();
  }
  const size_t count = targets.size();
  // Every communicator at once: an abort may take NCCL's proxy join (about
  // 0.5 s; a blocking communicator's revoke waits for it) and the ones of a
  // job add up; bounded, since an abort can hang (NCCL: init.cc
  // commDestroySync waits for every CUDA graph that captured the
  // communicator, localPersistentRefs).
  const std::string hung = inParallel(k, "communicators aborted", "resilient-abort",
                                      std::move(targets), [](CommunicatorPtr& c) { c->abort(); });
  if (!hung.empty()) {
    const std::string what =
        "the abort of " + hung + " did not return within " +
        std::to_string(options_.finalizeTimeout.count()) +
        " ms (CUDA graphs still holding the communicator, or a wedged driver): this rank "
        "leaves the job";
    RES_WARN(log::kRestart, "restart: %s", what.c_str());
    timeline_.record(k, "abort hung", what);
    std::lock_guard<std::mutex> lock(commsMutex_);
    abortHung_ = what;
  }
  runAbortHook("abort", options_.abort, state_);
  timeline_.record(k, "abort done", std::to_string(count) + " communicators aborted");
}

void Loop::publish(FaultReason reason, const std::string& detail, int culprit) {
  // Part of the recovery: a store that does not answer costs at most the
  // barrier's timeout here (publishAndRaise goes on without the record), and
  // the rank, busy with a fault, is not hung.
  touchProgress();
  const store::DeadlineScope bound(store::SteadyClock::now() + options_.barrierTimeout);
  FaultRecord r;
  r.iteration = state_.iteration;
  r.reason = reason;
  r.reporter = state_.initialRank;
  r.subject = state_.initialRank;
  r.culprit = culprit;
  r.detail = detail;
  publishAndRaise(*faults_, r, *interruption_);
}

void Loop::runBounded(const char* what, const std::function<void(const State&)>& hook,
                      milliseconds timeout) {
  if (!hook) {
    return;
  }
  const State snapshot = state_;
  detail::runBounded(timeout, what, "resilient-hook", [hook, snapshot] { hook(snapshot); });
}

void Loop::applyStormPolicy(int k, const std::vector<FaultRecord>& records) {
  const RestartStorm::Verdict mine =
      storm_.restart(k, static_cast<int64_t>(monotonicNs() / 1000000), records);
  // The first proposal written decides for every rank (their windows may
  // differ by a restart at the edge).
  const std::string proposal =
      mine.stop ? "stop " + mine.message : "go " + std::to_string(mine.backoff.count());
  const store::CasResult decided =
      store_->compareSet(keys_->stormDecision(k), std::nullopt, proposal);
  const std::string decision = decided.current.value_or(proposal);
  if (decision.rfind("stop ", 0) == 0) {
    const std::string why = decision.substr(5);
    timeline_.record(k, "restart storm", why);
    RES_WARN(log::kRestart, "restart: %s", why.c_str());
    leave(std::make_exception_ptr(RestartAbort(why)));
  }
  const milliseconds backoff(std::strtoll(decision.c_str() + 3, nullptr, 10));
  if (backoff <= milliseconds(0)) {
    return;
  }
  timeline_.record(k, "back-off",
                   std::to_string(backoff.count()) + " ms (restart " +
                       std::to_string(mine.inWindow) + " within the storm window)");
  // Waiting is not hanging: the monitor sees progress every slice.
  const auto until = std::chrono::steady_clock::now() + backoff;
  while (std::chrono::steady_clock::now() < until) {
    touchProgress();
    std::this_thread::sleep_until(
        std::min(until, std::chrono::steady_clock::now() + milliseconds(100)));
  }
}

void Loop::recover() {
  const int k = state_.iteration;
  restartsAtRecovery_ = storeRestartsNoted();
  if (const std::string unhealthy = tearDown(k); !unhealthy.empty()) {
    publish(FaultReason::kHealthCheck, unhealthy, state_.initialRank);
    leave(needsNewProcess_ ? std::make_exception_ptr(RankNeedsNewProcess(unhealthy))
                           : std::make_exception_ptr(HealthCheckError(unhealthy)));
  }
  // What this rank's communicators had enqueued, for "who is behind".
  const CommProgress progress = commProgressOf(*blackbox_);
  if (!progress.empty()) {
    publishCommProgress(*store_, *keys_, k, state_.initialRank, progress);
  }
  passIterationBarrier(k);
  // During the recovery only this thread calls the store (the monitor thread
  // and the health exchange are gone): a restart noted from here on came
  // after this rank's barrier completed.
  restartsAtPassage_ = storeRestartsNoted();

  const RestartVerdict verdict = decideRestart(k);
  if (storeRestartsNoted() != restartsAtRecovery_) {
    // The store restarted during this recovery: the ranks it terminated may
    // be marked on the lost instance only (this rank's put-back ran before
    // it knew them), and the barriers to come would wait for them.
    for (const int t : verdict.terminated) {
      barrier_->markTerminated(t, "terminated (put back: the store restarted)");
    }
  }
  if (options_.terminateCulprits) {
    // Every rank, so that the culprits are counted at the barriers to come
    // whoever wrote the verdict (idempotent: one compare-and-set each).
    for (const int c : verdict.culprits) {
      barrier_->markTerminated(c, "culprit");
    }
  }
  std::string culpritText;
  for (const int c : verdict.culprits) {
    culpritText += (culpritText.empty() ? "" : ", ") + std::to_string(c);
  }
  timeline_.record(k, "culprits",
                   verdict.culprits.empty() ? "none named" : "ranks " + culpritText);
  if (verdict.terminated.count(state_.initialRank) != 0) {
    leave(std::make_exception_ptr(RankDiscarded(
        "rank " + std::to_string(state_.initialRank) + " was terminated in iteration " +
        std::to_string(k) +
        (verdict.culprits.count(state_.initialRank) != 0 ? " as the culprit of a fault" : ""))));
  }
  state_.culprit = verdict.culprits.count(state_.initialRank) != 0;
  applyStormPolicy(k, verdict.root);
  reassign(k, verdict);
}

bool Loop::isVerdictText(const std::optional<std::string>& value) {
  return value && !value->empty() && value->front() == '{';
}

uint64_t Loop::storeRestartsNoted() const {
  return storeRestarts_ ? storeRestarts_->count() : 0;
}

bool Loop::storeRestartedInIteration() const {
  return storeRestartsNoted() != restartsAtIteration_;
}

bool Loop::storeRestartedSincePassage() const {
  return storeRestartsNoted() != restartsAtPassage_;
}

Loop::RestartVerdict Loop::decideRestart(int k) {
  const auto follow = [this, k](const std::string& text) {
    lastVerdict_ = {k, text};
    {
      // Put back at once should the store restart from here on.
      std::lock_guard<std::mutex> lock(keptMutex_);
      kept_.verdict = lastVerdict_;
    }
    const nlohmann::json j = nlohmann::json::parse(text);
    RestartVerdict v;
    v.culprits = j.at("culprits").get<std::set<int>>();
    v.terminated = j.at("terminated").get<std::set<int>>();
    v.joiners = j.at("joiners").get<int64_t>();
    if (j.contains("root")) {
      v.root.push_back(FaultRecord::fromJson(j.at("root").get<std::string>()));
    }
    return v;
  };
  // Every rank leaves the barrier at once: had each one that finds no
  // verdict yet computed it (all of them, in practice), the store would serve
  // every record and abort time once per rank. One rank claims the verdict
  // and computes it; the others wait for it, and one of them takes the claim
  // over when it has not come within a monitor interval (its rank died or
  // stalls).
  //
  // A store restarted after the barrier lost the records, and maybe a
  // verdict some rank already follows: a rank whose client saw the restart
  // since its barrier completed (restartsAtPassage_) neither claims nor
  // computes. A rank that saw none completed the barrier on the instance it
  // claims on, so every rank arrived there, none passed it on an older one
  // (nor wrote a verdict there; passIterationBarrier), and its verdict
  // replaces its own claim only (compare-and-set), which a restart in
  // between has wiped. Any verdict found is thus the one every rank follows.
  const std::string key = keys_->verdict(k);
  const std::string myClaim = "claimed by " + std::to_string(state_.initialRank);
  std::optional<std::string> expected;  // the key's value this rank may claim over
  while (!storeRestartedSincePassage()) {
    const store::CasResult claim = store_->compareSet(key, expected, myClaim);
    if (isVerdictText(claim.current)) {
      return follow(*claim.current);
    }
    if (claim.swapped) {
      if (storeRestartedSincePassage()) {
        break;  // the claim may stand on the new instance: decide nothing
      }
      const std::string decided = computeVerdict(k);
      const store::CasResult written = store_->compareSet(key, myClaim, decided);
      if (written.swapped) {
        // Followed (kept for a put-back) before anything else reaches the
        // store, which may have restarted since.
        RestartVerdict v = follow(decided);
        store_->set(keys_->verdictReady(k), "1");
        return v;
      }
      if (isVerdictText(written.current)) {
        return follow(*written.current);
      }
      expected = written.current;  // taken over, or the store restarted
      continue;
    }
    try {
      store_->waitGet(keys_->verdictReady(k), store::Timeout(options_.monitorThreadInterval));
      if (const std::optional<std::string> decided = store_->get(key); isVerdictText(decided)) {
        return follow(*decided);
      }
      expected = std::nullopt;  // the store restarted between the two calls
    } catch (const store::TimeoutError&) {
      timeline_.record(k, "verdict late",
                       (claim.current ? *claim.current : std::string("a rank")) + " " +
                           std::to_string(options_.monitorThreadInterval.count()) +
                           " ms ago; computing it here");
      expected = claim.current;
    }
  }
  return follow(awaitPutBackVerdict(k));
}

void Loop::endOnLostStore(const std::string& why) {
  // No rank follows a verdict of this restart (one that did puts it back at
  // its next store call, long before), and none can decide one any rank
  // could trust: every rank in it ends alike, so the job ends. A joiner
  // waiting has nothing to join and an agent replaces nobody (as after
  // RestartAbort, Loop::leave).
  try {
    store_->set(keys_->finished(), "aborted", options_.barrierTimeout);
  } catch (const store::StoreError& e) {
    RES_WARN(log::kRestart, "restart: cannot record the job's end in the store: %s", e.what());
  }
  throw StoreUnavailable(why);
}

std::string Loop::computeVerdict(int k) {
  const std::vector<FaultRecord> records = faults_->recordsOf(k);
  std::set<int> terminated = barrier_->terminated();
  // A store restarted during the iteration lost records, abort times and
  // progress counts of it: what is left could name a rank that only aborted
  // (its peers' records of its closing connections, its abort time gone).
  // A culprit is terminated alive: none is named on such evidence (a rank
  // that keeps hanging is named in the next iteration, on a whole record).
  const bool evidenceLost = storeRestartedInIteration();
  if (evidenceLost) {
    timeline_.record(k, "culprits withheld",
                     "the store restarted during the iteration: its records are incomplete");
  }
  const std::set<int> culprits =
      evidenceLost ? std::set<int>() : findCulprits(k, records, terminated);
  if (options_.terminateCulprits) {
    terminated.insert(culprits.begin(), culprits.end());
  }
  nlohmann::json j{{"culprits", culprits},
                   {"terminated", terminated},
                   {"joiners", registeredJoiners(*store_, *keys_, admittedJoiners_)}};
  if (!records.empty()) {
    j["root"] = records.front().toJson();
  }
  return j.dump();
}

std::string Loop::awaitPutBackVerdict(int k) {
  timeline_.record(k, "store restarted",
                   "after the iteration barrier; waiting for the verdict to be put back");
  RES_WARN(log::kRestart,
           "restart: the job's store restarted during restart %d: rank %d decides nothing and "
           "waits up to %lld ms for the verdict a rank that followed it puts back",
           k, state_.initialRank, static_cast<long long>(options_.barrierTimeout.count()));
  const std::string key = keys_->verdict(k);
  const auto until = std::chrono::steady_clock::now() + options_.barrierTimeout;
  for (;;) {
    touchProgress();
    if (std::optional<std::string> decided = store_->get(key); isVerdictText(decided)) {
      return std::move(*decided);
    }
    const auto left = std::chrono::ceil<milliseconds>(until - std::chrono::steady_clock::now());
    if (left <= milliseconds(0)) {
      endOnLostStore("the job's store " + store_->describe() + " restarted during restart " +
                     std::to_string(k) + " before rank " + std::to_string(state_.initialRank) +
                     " read the restart's verdict, and no rank that read it put it back within " +
                     std::to_string(options_.barrierTimeout.count()) +
                     " ms: the fault records it was decided on are lost");
    }
    try {
      store_->waitGet(keys_->verdictReady(k),
                      store::Timeout(std::min(left, options_.monitorThreadInterval)));
      // Ready, yet no verdict: it was set on an instance that restarted
      // since; the next put-back sets it again.
      std::this_thread::sleep_for(std::min(left, milliseconds(10)));
    } catch (const store::TimeoutError&) {
    }
  }
}

std::string Loop::tearDown(int k) {
  interruption_->raise("the iteration failed");
  while (!interruption_->waitAborted(milliseconds(1000))) {
  }
  health_.reset();
  monitor_.reset();
  setPhase(RankPhase::kRestarting);
  std::string unhealthy;
  try {
    runBounded("finalize", options_.finalize, options_.finalizeTimeout);
    timeline_.record(k, "finalized");
  } catch (...) {
    unhealthy = "finalize failed: " + describeException(std::current_exception());
  }
  std::vector<CommunicatorPtr> aborted;
  {
    std::lock_guard<std::mutex> lock(commsMutex_);
    aborted = communicatorsLocked();
    previousComms_ = std::move(comms_);
    comms_.clear();
    userComms_.clear();
    if (unhealthy.empty() && !abortHung_.empty()) {
      unhealthy = std::exchange(abortHung_, {});
    }
  }
  // A group left open on this (the training) thread swallows every later
  // collective of it, silently: asked before anything is made anew.
  if (unhealthy.empty()) {
    try {
      checkThread(aborted, "after the abort");
    } catch (const std::exception& e) {
      unhealthy = e.what();
    }
  }
  rendezvous_.reset();
  if (unhealthy.empty()) {
    try {
      runBounded("health check", restartChecks_, options_.healthCheckTimeout);
      timeline_.record(k, "health checked");
    } catch (const RankNeedsNewProcess& e) {
      needsNewProcess_ = true;
      unhealthy = std::string("health check failed: ") + e.what();
    } catch (...) {
      unhealthy = "health check failed: " + describeException(std::current_exception());
    }
  }
  return unhealthy;
}

void Loop::passIterationBarrier(int k) {
  setPhase(RankPhase::kIterationBarrier);
  for (;;) {
    bool verdictPutBack = false;
    // Between slices: a culprit the records already name (a fault detected
    // before the named rank began its abort) is terminated now, and so
    // counted, rather than when its monitor's hard timeout kills it. After a
    // store restart in this iteration, a verdict put back ends the wait: the
    // barrier completed on the lost instance for the rank that put it back,
    // and perhaps for this rank too, whose release was lost with it (the
    // client sent the arrival again to the new instance, where the ranks
    // released before never come again).
    const std::function<bool()> betweenSlices = [this, k, &verdictPutBack] {
      if (storeRestartedInIteration()) {
        try {
          verdictPutBack = isVerdictText(store_->get(keys_->verdict(k)));
        } catch (const store::StoreError&) {
          // Looked at again after the next slice.
        }
        return verdictPutBack;
      }
      if (options_.terminateCulprits) {
        for (const int c : settledCulprits(k)) {
          barrier_->markTerminated(c, "culprit");
        }
      }
      return false;
    };
    std::vector<int> missing;
    try {
      missing = barrier_->wait(keys_->iterationBarrier(), static_cast<uint64_t>(k),
                               options_.barrierTimeout, betweenSlices, {.markMissing = true});
    } catch (const RankShouldRestart&) {
      if (!verdictPutBack) {
        throw;
      }
    }
    if (!verdictPutBack && missing.empty()) {
      break;
    }
    // A verdict is there: some rank passed this barrier on a store instance
    // that restarted since (the restart lost the arrivals) and put back the
    // verdict it follows: follow it too, declare nobody dead.
    if (verdictPutBack || isVerdictText(store_->get(keys_->verdict(k)))) {
      timeline_.record(k, "iteration barrier", "its verdict was put back after a store restart");
      return;
    }
    if (storeRestartsNoted() != restartsAtRecovery_) {
      // None put back (yet): the missing ranks may be alive past this
      // barrier as well as dead (their count on the lost instance gone too).
      // Declaring live ranks dead would split the job: the restart ends here.
      std::string names;
      for (const int m : missing) {
        names += (names.empty() ? "" : ", ") + std::to_string(m);
      }
      endOnLostStore("the job's store " + store_->describe() + " restarted during restart " +
                     std::to_string(k) +
                     " and its iteration barrier lost the arrivals counted before: ranks " +
                     names + " are missing, dead or past it, and none put back a verdict within " +
                     std::to_string(options_.barrierTimeout.count()) + " ms");
    }
    for (const int m : missing) {
      FaultRecord r;
      r.iteration = k;
      r.reason = FaultReason::kBarrierTimeout;
      r.reporter = state_.initialRank;
      r.subject = m;
      r.culprit = m;
      r.detail = "never arrived at the iteration barrier within " +
                 std::to_string(options_.barrierTimeout.count()) + " ms";
      faults_->publish(r);
      barrier_->markTerminated(m, "barrier-timeout");
    }
  }
  timeline_.record(k, "iteration barrier");
}

std::set<int> Loop::findCulprits(int k, const std::vector<FaultRecord>& records,
                                 const std::set<int>& terminated) {
  // After the iteration barrier every rank not terminated has arrived, after
  // publishing its abort time: the times are final, so are the culprits (a
  // rank without one never aborted: it died or hung).
  std::set<int> culprits =
      culpritsOf(records, readAbortTimes(*store_, *keys_, k, namedRanks(records)));
  const bool hang = std::any_of(records.begin(), records.end(), [](const FaultRecord& r) {
    return r.reason == FaultReason::kCollectiveHung || r.reason == FaultReason::kSoftTimeout;
  });
  if (hang) {
    std::vector<int> live;
    for (int r = 0; r < world_->initialWorldSize(); ++r) {
      if (terminated.count(r) == 0) {
        live.push_back(r);
      }
    }
    for (const int r : behindRanks(readCommProgress(*store_, *keys_, k, live))) {
      culprits.insert(r);
    }
  }
  return culprits;
}

void Loop::reassign(int k, const RestartVerdict& verdict) {
  AssignmentContext context;
  context.key = [this](int initialRank) { return registry_->hostOf(initialRank); };
  // Every process that joined by the verdict comes in as a spare.
  const int64_t joiners = std::max(verdict.joiners, admittedJoiners_);
  context.joined = static_cast<int>(joiners - admittedJoiners_);
  const int slots = world_->initialWorldSize() + context.joined;
  for (const int r : verdict.terminated) {
    // A joiner admitted now may have died already: terminated in the World it
    // enters (a joiner further back in the queue is not admitted yet).
    if (r < slots && (r >= world_->initialWorldSize() || !world_->terminated(r))) {
      context.terminated.push_back(r);
    }
  }
  previousWorld_ = world_;
  world_ = assignRanks(*world_, *options_.rankAssignment, context);
  registry_->setWorldSize(world_->initialWorldSize());
  if (context.joined > 0) {
    // The first live rank of the new World that ran this recovery (not a
    // joiner: they wait to be told) wakes the joiners. A joiner told nothing
    // (that rank died first) is missing at the next barrier, declared dead.
    int announcer = -1;
    for (const int r : world_->liveByRank()) {
      if (r < previousWorld_->initialWorldSize()) {
        announcer = r;
        break;
      }
    }
    if (announcer == state_.initialRank) {
      Admissions admissions =
          admissionsOf(*store_, *keys_, k, admittedJoiners_, joiners, *previousWorld_, *world_);
      {
        std::lock_guard<std::mutex> lock(keptMutex_);
        kept_.announced = admissions;
      }
      announceAdmissions(*store_, *keys_, admissions);
    }
  }
  admittedJoiners_ = joiners;
  state_.iteration = k + 1;
  timeline_.record(state_.iteration, "reassigned",
                   std::to_string(context.terminated.size()) + " ranks terminated" +
                       (context.joined > 0 ? ", " + std::to_string(context.joined) + " joined"
                                           : std::string()));
  if (world_->terminated(state_.initialRank)) {
    leave(std::make_exception_ptr(RankDiscarded("the rank assignment terminated rank " +
                                                std::to_string(state_.initialRank))));
  }
}

std::set<int> Loop::settledCulprits(int iteration) {
  const std::vector<FaultRecord> records = faults_->recordsOf(iteration);
  // The records are read before the abort times: a record caused by rank c's
  // abort was detected after c published its abort time (before closing
  // anything), so that time is there to rule the record out. A named rank
  // without one may be on its way still: named only by a fault detected
  // before any abort began.
  const std::set<int> named = namedRanks(records);
  const AbortTimes begun = readAbortTimes(*store_, *keys_, iteration, named);
  if (begun.size() == named.size()) {
    return culpritsOf(records, begun);  // the first abort is not asked
  }
  return culpritsOf(records, begun, readFirstAbort(*store_, *keys_, iteration));
}

}  // namespace resilient::restart
