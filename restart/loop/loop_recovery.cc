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

  const RestartVerdict verdict = decideRestart(k);
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

Loop::RestartVerdict Loop::decideRestart(int k) {
  const auto parse = [](const std::string& text) {
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
  // and computes it; the others wait for it, and compute it themselves only
  // when it has not come within a monitor interval (its rank died or
  // stalls): the first verdict written decides either way.
  const store::CasResult claim = store_->compareSet(keys_->verdictClaim(k), std::nullopt,
                                                    std::to_string(state_.initialRank));
  if (!claim.swapped) {
    try {
      const std::string decided =
          store_->waitGet(keys_->verdict(k), store::Timeout(options_.monitorThreadInterval));
      lastVerdict_ = {k, decided};
      return parse(decided);
    } catch (const store::TimeoutError&) {
      timeline_.record(k, "verdict late",
                       "rank " + claim.current.value_or("?") + " claimed it " +
                           std::to_string(options_.monitorThreadInterval.count()) +
                           " ms ago; computing it here");
    }
  }
  if (const std::optional<std::string> decided = store_->get(keys_->verdict(k))) {
    lastVerdict_ = {k, *decided};
    return parse(*decided);
  }
  const std::vector<FaultRecord> records = faults_->recordsOf(k);
  std::set<int> terminated = barrier_->terminated();
  const std::set<int> culprits = findCulprits(k, records, terminated);
  if (options_.terminateCulprits) {
    terminated.insert(culprits.begin(), culprits.end());
  }
  nlohmann::json j{{"culprits", culprits},
                   {"terminated", terminated},
                   {"joiners", registeredJoiners(*store_, *keys_, admittedJoiners_)}};
  if (!records.empty()) {
    j["root"] = records.front().toJson();
  }
  const std::string mine = j.dump();
  const store::CasResult cas = store_->compareSet(keys_->verdict(k), std::nullopt, mine);
  lastVerdict_ = {k, cas.current.value_or(mine)};
  return parse(lastVerdict_.second);
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
    // Between slices: a culprit the records already name (a fault detected
    // before the named rank began its abort) is terminated now, and so
    // counted, rather than when its monitor's hard timeout kills it.
    const std::function<bool()> terminateNamedCulprits = [this, k] {
      if (options_.terminateCulprits) {
        for (const int c : settledCulprits(k)) {
          barrier_->markTerminated(c, "culprit");
        }
      }
      return false;
    };
    const std::vector<int> missing =
        barrier_->wait(keys_->iterationBarrier(), static_cast<uint64_t>(k), options_.barrierTimeout,
                       terminateNamedCulprits, {.markMissing = true});
    if (missing.empty()) {
      break;
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
      announceAdmissions(*store_, *keys_, k, admittedJoiners_, joiners, *previousWorld_, *world_);
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
