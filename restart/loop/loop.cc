#include "restart/loop/loop.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/knobs.h"
#include "common/log.h"
#include "common/params.h"
#include "resilient/restart/health.hpp"
#include "restart/comm/store_rendezvous.h"
#include "restart/hooks/bounded_call.h"
#include "restart/loop/job/behind_ranks.h"
#include "restart/loop/job/culprits.h"
#include "restart/loop/sliced_wait.h"
#include "restart/loop/text/exception_text.h"
#include "restart/monitor/spawn.h"
#include "restart/protocol/terminated_ranks.h"
#include "store/client_options.h"
#include "store/errors.h"
#include "store/open_store.h"
#include "store/prefix_view.h"
#include "store/tcp/server.h"

// The loop's iterations: run until done, one iteration (the function under
// the monitor thread), its communicators, the end of the job; and what
// CallContext asks of the loop. Setup is loop_setup.cc, recovery after a fault
// loop_recovery.cc.
namespace resilient::restart {

using protocol::FaultReason;
using protocol::FaultRecord;
using protocol::RankPhase;
using std::chrono::milliseconds;

namespace {

// The iteration's rendezvous as the communicator factories (and the user)
// see it: the waits run in slices, and a fault raised meanwhile -- e.g. a rank
// whose initialize or health check failed before it made its communicators,
// so that its handles never come -- ends them with RankShouldRestart instead
// of at the communicator timeout. Repeating an all-gather slice sets this
// rank's own key again with the same value, which is harmless. A rank that
// waits here for its peers is not hung: each slice shows progress to its
// monitor (`progress`), so that the soft and hard timeouts name the rank that
// never comes, not every rank that waits for it.
class InterruptibleRendezvous final : public Rendezvous {
 public:
  InterruptibleRendezvous(std::unique_ptr<Rendezvous> inner, const Interruption& interruption,
                          milliseconds slice, std::function<void()> progress)
      : inner_(std::move(inner)),
        interruption_(interruption),
        slice_(slice),
        progress_(std::move(progress)) {}

  void publish(std::string_view key, std::string_view value) override {
    inner_->publish(key, value);
  }
  std::string lookup(std::string_view key, milliseconds timeout) override {
    return sliced(timeout, "looking up '" + std::string(key) + "'",
                  [&](milliseconds t) { return inner_->lookup(key, t); });
  }
  std::vector<std::string> allGather(std::string_view round, std::string_view mine,
                                     milliseconds timeout) override {
    return sliced(timeout, "all-gather '" + std::string(round) + "'",
                  [&](milliseconds t) { return inner_->allGather(round, mine, t); });
  }
  void waiting() noexcept override { progress_(); }

 private:
  template <class F>
  auto sliced(milliseconds timeout, const std::string& what, F&& wait)
      -> std::invoke_result_t<F&, milliseconds> {
    using Result = std::invoke_result_t<F&, milliseconds>;
    return waitInSlices<TimeoutError>(
        timeout, slice_, [&](const auto& sliceTime) { return wait(sliceTime()); },
        [&] {
          progress_();
          if (interruption_.raised()) {
            throw RankShouldRestart("rendezvous: interrupted while " + what + " (" +
                                    interruption_.reason() + ")");
          }
        },
        [&](const TimeoutError& e) -> Result {
          throw TimeoutError(std::string(e.what()) + " (" + std::to_string(timeout.count()) +
                             " ms in all)");
        });
  }

  std::unique_ptr<Rendezvous> inner_;
  const Interruption& interruption_;
  milliseconds slice_;
  std::function<void()> progress_;
};

}  // namespace

// ---- setup --------------------------------------------------------------------

// ---- one iteration ------------------------------------------------------------

void Loop::run(const std::function<void(CallContext&)>& fn) {
  if (!options_.enabled) {
    state_.mode = Mode::kActive;
    state_.activeRank = state_.rank;
    state_.activeWorldSize = state_.worldSize;
    CallContext ctx(*this, state_);
    fn(ctx);
    return;
  }
  if (setUp_) {
    throw InternalError("Wrapper::run may be called once per Wrapper");
  }
  if (!setup()) {
    return;  // a joiner the job did not need: it finished first
  }
  try {
    for (;;) {
      applyWorld();
      if (runIteration(fn) == Outcome::kCompleted) {
        finish();
        return;
      }
      recover();
    }
  } catch (const StoreUnavailable&) {
    // No record can reach a store that does not answer: leave without one.
    leave(std::current_exception(), /*recordInStore=*/false);
  }
}

Loop::Outcome Loop::runIteration(const std::function<void(CallContext&)>& fn) {
  const int k = state_.iteration;
  restartsAtIteration_ = storeRestartsNoted();
  interruption_ = std::make_unique<Interruption>();
  blackbox_->setFailFast(false);
  blackbox_->skipSeen();
  setPhase(RankPhase::kRunning);
  MonitorThreadConfig config;
  config.iteration = k;
  config.initialRank = state_.initialRank;
  config.storeWaitChunk = options_.monitorThreadInterval;
  config.progressInterval = options_.progressWatchdogInterval;
  monitor_ = std::make_unique<MonitorThread>(
      *store_, *keys_, *faults_, *registry_, *blackbox_, *interruption_,
      statusPage_ ? &statusPage_->page() : nullptr, atomicMutex_, config,
      [this] { abortIteration(); }, [this] { return communicatorsAsyncError(); });

  if (state_.active() && options_.healthInterval.count() > 0) {
    HealthExchangeConfig health;
    health.iteration = k;
    health.initialRank = state_.initialRank;
    health.activeRank = state_.activeRank;
    health.activeWorldSize = state_.activeWorldSize;
    health.interval = options_.healthInterval;
    const auto ns = [](std::chrono::milliseconds ms) { return uint64_t(ms.count()) * 1000000; };
    health.links.ratio = options_.slowLinkPercent / 100.0;
    health.links.windowNs = ns(options_.slowLinkWindow);
    health.stragglers.minLagNs = ns(options_.stragglerLag);
    health.stragglers.windowNs = ns(options_.stragglerWindow);
    health.restartOnSlowLink = options_.slowLinkRestart;
    health.restartOnStraggler = options_.stragglerRestart;
    health.stuckRanks.timeoutNs = ns(options_.stuckRankTimeout);
    health.restartOnStuckRank = options_.stuckRankRestart;
    health.activity = [this] {
      return RankActivity{lastPingNs_.load(std::memory_order_relaxed),
                          hangProtectionOff_.load(std::memory_order_relaxed) > 0};
    };
    health_ = std::make_unique<HealthExchange>(*store_, *keys_, *faults_, *registry_, *blackbox_,
                                               *interruption_, timeline_, health);
  }
  CallContext ctx(*this, state_);
  std::exception_ptr fault;
  FaultReason reason = FaultReason::kException;
  try {
    if (options_.initialize) {
      options_.initialize(state_);
    }
    if (options_.healthCheck) {
      try {
        runBounded("health check", options_.healthCheck, options_.healthCheckTimeout);
      } catch (...) {
        reason = FaultReason::kHealthCheck;
        throw;
      }
    }
    if (state_.active()) {
      try {
        createCommunicators();
      } catch (const HealthCheckError&) {
        reason = FaultReason::kHealthCheck;  // this rank's NCCL state: it leaves
        throw;
      }
      // A restart that began before this point interrupted nothing (the
      // interrupt hook ran with no function to stop, e.g. during a slow
      // initialize hook): the function is not entered at all.
      if (interruption_->cancelled()) {
        throw RankShouldRestart("a restart began before the function was entered");
      }
      timeline_.record(k, "function entered");
      fn(ctx);
      timeline_.record(k, "function returned");
    }
    setPhase(RankPhase::kCompleting);
    if (!completeTogether()) {
      throw RankShouldRestart("iteration " + std::to_string(k) +
                              " was interrupted before its completion barrier completed");
    }
    health_.reset();
    monitor_.reset();
    return Outcome::kCompleted;
  } catch (const RankShouldRestart&) {
    // Someone else's fault: already published.
  } catch (const StoreUnavailable&) {
    throw;  // nothing to restart with (Loop::run)
  } catch (const RestartAbort&) {
    publish(FaultReason::kRestartAbort, describeException(std::current_exception()));
    leave(std::current_exception());
  } catch (...) {
    fault = std::current_exception();
  }
  if (fault) {
    if (reason == FaultReason::kHealthCheck) {
      publish(reason, describeException(fault), state_.initialRank);
      leave(fault);
    }
    state_.fnException = fault;
    publish(reason, describeException(fault));
  }
  return Outcome::kRestart;
}

void Loop::createCommunicators() {
  auto view = std::make_shared<store::PrefixView>(store_, keys_->rendezvous(state_.iteration));
  rendezvous_ = std::make_unique<InterruptibleRendezvous>(
      std::make_unique<comm::StoreRendezvous>(std::move(view), state_.activeRank,
                                              state_.activeWorldSize),
      *interruption_, std::min(options_.monitorThreadInterval, milliseconds(100)),
      [this] { touchProgress(); });
  std::vector<int> removed;
  std::vector<int> joined;
  bool onlyRemovals = previousWorld_.has_value();
  if (previousWorld_) {
    // Members of the previous communicators (its active ranks) that are not
    // active now, by their rank in it, and the newcomers, by their rank in
    // the new ones; any newcomer rules out a shrink alone.
    static const RankSlot kNotYetJoined{-1, Mode::kTerminated, -1};
    for (int r = 0; r < world_->initialWorldSize(); ++r) {
      const RankSlot& before =
          r < previousWorld_->initialWorldSize() ? previousWorld_->at(r) : kNotYetJoined;
      const RankSlot& now = world_->at(r);
      if (before.mode == Mode::kActive && now.mode != Mode::kActive) {
        removed.push_back(before.activeRank);
      } else if (now.mode == Mode::kActive && before.mode != Mode::kActive) {
        onlyRemovals = false;
        joined.push_back(now.activeRank);
      }
    }
    std::sort(removed.begin(), removed.end());
    std::sort(joined.begin(), joined.end());
  }
  const int iteration = state_.iteration;
  auto record = [this, iteration](const std::string& phase, const std::string& detail) {
    timeline_.record(iteration, phase, detail);
  };
  for (const auto& [name, factory] : options_.communicators) {
    if (interruption_->cancelled()) {
      throw RankShouldRestart("interrupted while creating communicator " + name);
    }
    auto previous = previousComms_.find(name);
    CommunicatorSetup setup{state_,
                            *rendezvous_,
                            name,
                            previous != previousComms_.end() ? previous->second : nullptr,
                            removed,
                            onlyRemovals,
                            options_.communicatorTimeout,
                            joined,
                            record,
                            [this](std::function<void()> abort) {
                              std::lock_guard<std::mutex> lock(commsMutex_);
                              creatingAbort_ = std::move(abort);
                              if (creatingAbort_ && interruption_->cancelled()) {
                                creatingAbort_();  // the restart began before
                              }
                            }};
    // A creation that waits on a missing peer ends when a restart begins,
    // not at its timeout: with the ring's exchange of handles only the
    // neighbours of a frozen rank waited, past the others' barrier timeout,
    // and were counted missing and discarded (the reliability matrix's
    // sigstop@startup, exception@recovery-comms).
    struct ClearAbort {  // whichever way the factory ends
      Loop& loop;
      ~ClearAbort() {
        std::lock_guard<std::mutex> lock(loop.commsMutex_);
        loop.creatingAbort_ = nullptr;
      }
    };
    CommunicatorPtr comm;
    try {
      const ClearAbort clear{*this};
      comm = factory(setup);
    } catch (...) {
      if (interruption_->cancelled()) {
        throw RankShouldRestart("interrupted while creating communicator " + name + ": " +
                                describeException(std::current_exception()));
      }
      throw;
    }
    if (!comm) {
      throw RestartError("communicator factory \"" + name + "\" returned no communicator");
    }
    std::lock_guard<std::mutex> lock(commsMutex_);
    comms_[name] = comm;
    if (interruption_->cancelled()) {
      comm->abort();  // the abort ran before this one existed
    }
  }
  timeline_.record(state_.iteration, "communicators ready",
                   std::to_string(options_.communicators.size()) + " made");
  releasePreviousCommunicators();
  std::vector<CommunicatorPtr> made;
  for (const auto& [name, comm] : comms_) {
    made.push_back(comm);
  }
  checkThread(made, "after the previous communicators were freed");
}

void Loop::releasePreviousCommunicators() {
  if (previousComms_.empty()) {
    return;
  }
  std::vector<CommunicatorPtr> previous;
  for (auto& [name, comm] : previousComms_) {
    previous.push_back(std::move(comm));
  }
  previousComms_.clear();
  // The last reference goes on the worker thread: the destructor frees.
  const std::string hung =
      inParallel(state_.iteration, "previous communicators freed", "resilient-free",
                 std::move(previous), [](CommunicatorPtr& c) { c.reset(); });
  if (!hung.empty()) {
    throw HealthCheckError(
        "freeing " + hung + " did not finish within " +
        std::to_string(options_.finalizeTimeout.count()) +
        " ms (NCCL did not return from ncclCommAbort): this rank leaves the job");
  }
}

std::vector<CommunicatorPtr> Loop::communicatorsLocked() const {
  std::vector<CommunicatorPtr> all;
  for (const auto& [name, comm] : comms_) {
    all.push_back(comm);
  }
  all.insert(all.end(), userComms_.begin(), userComms_.end());
  return all;
}

std::string Loop::inParallel(int k, const char* phase, const char* threadName,
                             std::vector<CommunicatorPtr> comms,
                             const std::function<void(CommunicatorPtr&)>& step) {
  std::vector<std::string> names;
  std::vector<std::function<void()>> steps;
  for (CommunicatorPtr& comm : comms) {
    names.push_back(comm->describe());
    steps.emplace_back([c = std::move(comm), step]() mutable { step(c); });
  }
  const auto start = std::chrono::steady_clock::now();
  const std::vector<size_t> hung =
      detail::runAllBounded(options_.finalizeTimeout, threadName, std::move(steps));
  const auto ms =
      std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start);
  timeline_.record(
      k, phase,
      std::to_string(names.size()) + " in " + std::to_string(ms.count()) + " ms (in parallel)");
  std::string what;
  for (const size_t i : hung) {
    what += (what.empty() ? "" : "; ") + names[i];
  }
  return what;
}

void Loop::checkThread(const std::vector<CommunicatorPtr>& comms, const char* when) {
  for (const CommunicatorPtr& comm : comms) {
    if (auto finding = comm->checkThread()) {
      throw HealthCheckError(std::string(when) + ": " + *finding);
    }
  }
}

bool Loop::completeTogether() {
  const int k = state_.iteration;
  const auto generation = static_cast<uint64_t>(k);
  bool released = true;
  // A terminated rank is counted here on its behalf only if it had no part
  // in this iteration's work (a spare, one gone before); an active rank that
  // died once its function had returned is counted by its monitor
  // (restart/monitor/monitor.cc, onRankEnded in phase completing). So an
  // active rank that left before its function returned holds the barrier, and
  // the iteration restarts rather than completes without its part.
  const std::function<bool(int)> onBehalf = [this](int r) {
    return r >= world_->initialWorldSize() || world_->at(r).mode != Mode::kActive;
  };
  try {
    if (state_.active()) {
      barrier_->wait(keys_->completionBarrier(), generation, options_.completionTimeout,
                     [this] { return interrupted(); }, {.onBehalf = onBehalf});
    } else {
      // A spare waits as long as the active ranks compute (no completion
      // timeout applies to it; the barrier shows its progress) and notices an
      // interruption within a short slice so that it does not hold up
      // everyone's recovery.
      barrier_->wait(keys_->completionBarrier(), generation, kSpareWait,
                     [this] { return interrupted(); },
                     {.chunk = kSpareSlice, .onBehalf = onBehalf});
    }
  } catch (const RankShouldRestart&) {
    released = false;
  }
  // One decision for every rank. A rank that died after its function
  // returned is counted at the barrier (terminated), so the barrier can
  // complete for some ranks while the death's interruption reaches others
  // first: the first proposal in the store decides for all. A released rank
  // proposes completion; an interrupted one a restart, unless the barrier
  // completed meanwhile.
  const store::DeadlineScope bound(store::SteadyClock::now() + options_.completionTimeout);
  if (!released) {
    released = barrier_->completed(keys_->completionBarrier(), generation);
  }
  const store::CasResult decided = store_->compareSet(keys_->completionDecision(k), std::nullopt,
                                                      released ? "complete" : "restart");
  const bool complete = decided.current.value_or("") == "complete";
  timeline_.record(k, "completion decided",
                   std::string(complete ? "complete" : "restart") +
                       (decided.swapped ? " (proposed here)" : " (as proposed first elsewhere)"));
  return complete;
}

// ---- after a fault ------------------------------------------------------------

void Loop::finish() {
  const int k = state_.iteration;
  timeline_.record(k, "completed");
  if (options_.completion) {
    try {
      options_.completion(state_);
    } catch (...) {
      // This rank's own end fails; the others' does not: terminated, it is
      // counted at their termination barrier.
      leave(std::current_exception());
    }
  }
  // A joiner still waiting has nothing to join any more.
  store_->set(keys_->finished(), "1");
  barrier_->wait(keys_->terminationBarrier(), 0, options_.barrierTimeout, {});
  setPhase(RankPhase::kDone);
}

void Loop::leave(std::exception_ptr why, bool recordInStore) {
  health_.reset();
  monitor_.reset();
  if (recordInStore) {
    barrier_->markTerminated(state_.initialRank, "left: " + describeException(why));
  }
  state_.mode = Mode::kTerminated;
  if (!phaseTellsItsEnd()) {
    setPhase(RankPhase::kFailed);
  }
  timeline_.record(state_.iteration, "terminated", describeException(why));
  if (options_.terminate) {
    try {
      options_.terminate(state_);
    } catch (const std::exception& e) {
      RES_WARN(log::kRestart, "restart: the terminate hook failed: %s", e.what());
    }
  }
  try {
    std::rethrow_exception(why);
  } catch (const RestartAbort&) {
    // The job ends (an initialize hook, the retry controller, a storm: every
    // rank decides alike): a joiner still waiting has nothing to join, and an
    // agent replaces nobody, as after its completion (finish()).
    try {
      store_->set(keys_->finished(), "aborted", options_.barrierTimeout);
    } catch (const store::StoreError& e) {
      RES_WARN(log::kRestart, "restart: cannot record the job's end in the store: %s", e.what());
    }
  } catch (const RankNeedsNewProcess& e) {
    if (config::Params::global().get<config::kRestartExitForNewProcess>()) {
      // Under resilient-run: the agent starts a new process in this one's
      // place (after a withdrawal, not counted as a failure).
      const int code = dynamic_cast<const JoinerWithdrew*>(&e) != nullptr ? kExitWithdrew
                                                                         : kExitNeedsNewProcess;
      RES_WARN(log::kRestart, "restart: rank %d leaves for a new process (exit %d): %s",
               state_.initialRank, code, e.what());
      std::fflush(nullptr);
      std::_Exit(code);
    }
  } catch (...) {
  }
  std::rethrow_exception(why);
}

void Loop::withdraw(const std::string& why) {
  // First: its monitor exits without a record or touching the heartbeat,
  // which are the holder's of this initial rank.
  setPhase(RankPhase::kWithdrawn);
  timeline_.record(state_.iteration, "withdrawn", why);
  leave(std::make_exception_ptr(JoinerWithdrew("a joiner withdraws: " + why)),
        /*recordInStore=*/false);
}

bool Loop::phaseTellsItsEnd() const noexcept {
  if (!statusPage_) {
    return false;
  }
  const RankPhase phase = statusPage_->page().currentPhase();
  return phase == RankPhase::kWithdrawn || phase == RankPhase::kJoining;
}

// ---- for CallContext and the monitor ------------------------------------------

void Loop::setPhase(RankPhase phase) noexcept {
  if (statusPage_) {
    protocol::StatusPage& page = statusPage_->page();
    page.iteration.store(state_.iteration, std::memory_order_relaxed);
    page.autoProgressNs.store(monotonicNs(), std::memory_order_relaxed);
    page.phase.store(static_cast<uint32_t>(phase), std::memory_order_release);
  }
}

void Loop::touchProgress() noexcept {
  if (statusPage_) {
    statusPage_->page().autoProgressNs.store(monotonicNs(), std::memory_order_release);
  }
}

bool Loop::interrupted() const {
  return interruption_ && interruption_->raised();
}

void Loop::ping() noexcept {
  const uint64_t now = monotonicNs();
  lastPingNs_.store(now, std::memory_order_relaxed);
  if (statusPage_) {
    statusPage_->page().manualPingNs.store(now, std::memory_order_release);
  }
}

void Loop::hangProtection(bool off) noexcept {
  hangProtectionOff_.fetch_add(off ? 1 : -1, std::memory_order_relaxed);
  if (statusPage_) {
    if (off) {
      statusPage_->page().hangProtectionOff.fetch_add(1, std::memory_order_acq_rel);
    } else {
      statusPage_->page().hangProtectionOff.fetch_sub(1, std::memory_order_acq_rel);
    }
  }
}

bool Loop::cancelled() const noexcept {
  return interruption_ && interruption_->cancelled();
}

Communicator* Loop::communicator(const std::string& name) const {
  std::lock_guard<std::mutex> lock(commsMutex_);
  const auto it = comms_.find(name);
  if (it != comms_.end()) {
    return it->second.get();
  }
  for (const auto& [n, factory] : options_.communicators) {
    if (n == name) {
      return nullptr;  // a spare has none
    }
  }
  throw std::out_of_range("no communicator factory is named \"" + name + "\"");
}

Communicator* Loop::onlyCommunicator() const {
  if (options_.communicators.size() != 1) {
    throw std::out_of_range(
        "CallContext::communicator() needs exactly one factory in Options, not " +
        std::to_string(options_.communicators.size()));
  }
  return communicator(options_.communicators.front().first);
}

std::optional<std::string> Loop::communicatorsAsyncError() {
  // The user's registered communicators: nothing else waits on them. (The
  // library's own report their errors from the calls that wait on them.)
  std::lock_guard<std::mutex> lock(commsMutex_);
  for (const CommunicatorPtr& comm : userComms_) {
    if (std::optional<std::string> e = comm->asyncError()) {
      return comm->describe() + ": " + *e;
    }
  }
  return std::nullopt;
}

void Loop::registerCommunicator(CommunicatorPtr comm) {
  std::lock_guard<std::mutex> lock(commsMutex_);
  userComms_.push_back(comm);
  if (interruption_ && interruption_->cancelled()) {
    comm->abort();
  }
}

Rendezvous& Loop::rendezvous() const {
  if (!rendezvous_) {
    throw std::logic_error(
        "this iteration has no rendezvous (a spare, or before the communicators)");
  }
  return *rendezvous_;
}

}  // namespace resilient::restart
