// The restart loop behind Wrapper (docs/reference/restart-model.md §1.1 "Restart loop"):
//
//   setup: store, identity, monitor process, initial barrier, first assignment
//   per iteration k:
//     monitor thread; initialize; health check; communicators (active ranks);
//     the function (active) or the completion barrier straight away (spares);
//     completion barrier → completion hook, termination barrier, done.
//   on a fault (exception, RankShouldRestart, a fault published anywhere):
//     wait for the monitor thread's abort; finalize (bounded); health check
//     (bounded); iteration barrier k (dead ranks counted for them, missing
//     ones declared dead at the barrier timeout); fault records → culprits;
//     rank assignment; next iteration.
//   terminal: RestartAbort, a failed health check, a rank the assignment
//     terminated: marked terminated, terminate hook, rethrown.
//
// Tests drive it directly with a shared in-process store (threads as ranks).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "resilient/restart/timeline.hpp"
#include "resilient/restart/wrapper.hpp"
#include "restart/loop/interruption.h"
#include "restart/loop/job/barrier.h"
#include "restart/loop/job/health_exchange.h"
#include "restart/loop/job/joiners.h"
#include "restart/loop/job/rank_registry.h"
#include "restart/loop/monitoring/blackbox_watch.h"
#include "restart/loop/monitoring/monitor_thread.h"
#include "restart/loop/monitoring/rank_liveness.h"
#include "restart/loop/restart_storm.h"
#include "restart/loop/store_restarts.h"
#include "restart/loop/text/timeline.h"
#include "restart/protocol/fault_log.h"
#include "restart/protocol/job_keys.h"
#include "restart/protocol/status_page.h"
#include "store/store.h"

namespace resilient::store::tcp {
class StoreServer;
}

namespace resilient::restart {

// What a test may inject instead of what Options names.
struct LoopEnvironment {
  std::shared_ptr<store::Store> store;  // null: open Options::storeUrl
  bool setProcessEnvironment = true;    // RANK, WORLD_SIZE (off for threads as ranks)
  // Whether this rank joins the running job (null: NCCL_RESILIENT_RESTART_JOIN).
  std::optional<bool> join;
  // An injected store that can restart empty (tests): called once at setup
  // with what the store calls from inside a call, before that call reaches
  // the new instance (as store::ClientOptions::onServerRestart does).
  std::function<void(std::function<void()> onRestart)> followStoreRestarts;
};

class Loop {
 public:
  // A spare's wait for the active ranks: unbounded in practice, in slices.
  static constexpr std::chrono::milliseconds kSpareWait{std::chrono::hours(24 * 365)};
  static constexpr std::chrono::milliseconds kSpareSlice{10};

  explicit Loop(Options options, LoopEnvironment environment = {});
  ~Loop();
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;

  void run(const std::function<void(CallContext&)>& fn);
  const State& state() const noexcept { return state_; }
  std::vector<TimelineEvent> timeline() const { return timeline_.events(); }

  // For CallContext.
  void ping() noexcept;
  void hangProtection(bool off) noexcept;
  bool cancelled() const noexcept;
  std::recursive_mutex& atomicMutex() noexcept { return atomicMutex_; }
  Communicator* communicator(const std::string& name) const;
  Communicator* onlyCommunicator() const;
  void registerCommunicator(CommunicatorPtr comm);
  // The first asynchronous error of the user's registered communicators
  // (the monitor thread polls it), or nullopt.
  std::optional<std::string> communicatorsAsyncError();
  Rendezvous& rendezvous() const;

 private:
  enum class Outcome { kCompleted, kRestart };

  // False when this process joined the job and the job finished before it
  // was needed (nothing to run).
  bool setup();
  // A process that joins the running job (NCCL_RESILIENT_RESTART_JOIN): its
  // health check, its place among the joiners, its wait for admission.
  bool join();
  void startMonitorProcess(bool joining = false);
  void makeBarrier();  // for state_.initialRank
  // Puts back what this rank keeps in the store after the store restarted
  // empty (on StoreRestarts' thread; noexcept).
  void restoreStore() noexcept;
  // What restoreStore puts back, as of the latest World (under keptMutex_).
  void keepForRestore();
  void applyWorld();
  Outcome runIteration(const std::function<void(CallContext&)>& fn);
  void createCommunicators();
  void abortIteration() noexcept;  // the monitor thread's abort
  // Frees the previous iteration's communicators (inParallel); throws
  // HealthCheckError naming those NCCL did not let go of.
  void releasePreviousCommunicators();
  // This iteration's communicators, the factories' and the user's (the
  // caller holds commsMutex_).
  std::vector<CommunicatorPtr> communicatorsLocked() const;
  // Runs `step` on each of `comms` at once, each on its own thread, within
  // finalizeTimeout in all, and records "<phase>: N in X ms (in parallel)"
  // in iteration `k`'s timeline. `comms` is consumed (a step may drop the
  // last reference). Returns the descriptions of those whose step did not
  // finish, "; "-joined (empty: all did).
  std::string inParallel(int k, const char* phase, const char* threadName,
                         std::vector<CommunicatorPtr> comms,
                         const std::function<void(CommunicatorPtr&)>& step);
  // The first finding of `comms`' checkThread() on this thread: throws
  // HealthCheckError with it (`when`: after what).
  static void checkThread(const std::vector<CommunicatorPtr>& comms, const char* when);
  void publish(protocol::FaultReason reason, const std::string& detail, int culprit = -1);
  void recover();  // after a fault: through the iteration barrier to the next World
  // recover()'s steps, in order. tearDown: the function stopped, finalize,
  // the communicators aborted and the thread checked, the health checks;
  // what made the rank unhealthy, or empty.
  std::string tearDown(int k);
  void passIterationBarrier(int k);  // missing ranks recorded and terminated
  // What every rank does after iteration k's barrier, decided once: the
  // rank that claims it first (iteration/<k>/verdict holds its claim) reads
  // the records, names the culprits (terminated when the options say so),
  // counts the terminated ranks and the joiners, and writes it over its claim
  // (then iteration/<k>/verdict-ready); the others wait for it (one wait and
  // one get instead of every record; after a monitor interval without it, one
  // takes the claim over), so every rank computes the same World. A rank
  // whose store client saw the store restart since its iteration barrier
  // completed decides nothing: it follows the verdict put back by a rank that
  // followed it (restoreStore), or ends with StoreUnavailable.
  struct RestartVerdict {
    std::set<int> culprits;
    std::set<int> terminated;
    int64_t joiners = 0;                      // the next World holds this many
    std::vector<protocol::FaultRecord> root;  // the first record (the storm's kind)
  };
  RestartVerdict decideRestart(int k);
  std::string computeVerdict(int k);  // its text, from the records
  // Whether iteration/<k>/verdict holds a verdict (not a claim, not absent).
  static bool isVerdictText(const std::optional<std::string>& value);
  std::string awaitPutBackVerdict(int k);  // after a store restart
  // A restart that a store restart left undecidable: the job's end recorded,
  // then StoreUnavailable(why).
  [[noreturn]] void endOnLostStore(const std::string& why);
  // Whether this rank's store client saw the job's store restart since this
  // rank's iteration barrier completed (restartsAtPassage_).
  bool storeRestartedSincePassage() const;
  // ... since iteration k began (restartsAtIteration_): its records, abort
  // times and progress counts may be lost, so no culprit is named.
  bool storeRestartedInIteration() const;
  // The job's store restarts this rank's client noted (0: an injected store
  // that does not restart).
  uint64_t storeRestartsNoted() const;
  // The culprits of iteration k's records (`terminated`: the live ranks'
  // complement, for "who is behind").
  std::set<int> findCulprits(int k, const std::vector<protocol::FaultRecord>& records,
                             const std::set<int>& terminated);
  // The next World, with the verdict's terminated ranks and joiners.
  void reassign(int k, const RestartVerdict& verdict);
  void finish();  // after completion
  // The completion barrier of the iteration, and the one decision every rank
  // follows: true to complete, false to restart.
  bool completeTogether();
  // The restart-storm policy after iteration k's fault: one decision for
  // every rank (terminal past the limit), and the back-off it asks for.
  void applyStormPolicy(int k, const std::vector<protocol::FaultRecord>& records);
  // Terminal for this rank: records it as terminated (unless the store is
  // what failed), runs the terminate hook, rethrows `why`.
  [[noreturn]] void leave(std::exception_ptr why, bool recordInStore = true);
  // A joiner whose initial rank is another process's leaves for a new
  // process, its end recorded nowhere (restart/loop/job/joiners.h).
  [[noreturn]] void withdraw(const std::string& why);
  // Whether the rank's end is told by the phase it is in, not `failed`: a
  // withdrawn joiner (its monitor records nothing) and a joiner not yet
  // admitted (its monitor records it as a joiner's end, nobody interrupted).
  bool phaseTellsItsEnd() const noexcept;
  void runBounded(const char* what, const std::function<void(const State&)>& hook,
                  std::chrono::milliseconds timeout);
  void setPhase(protocol::RankPhase phase) noexcept;
  void touchProgress() noexcept;
  // The culprits of `iteration`'s records once its window for concurrent
  // faults has passed (empty before).
  std::set<int> settledCulprits(int iteration);
  bool interrupted() const;

  Options options_;
  LoopEnvironment environment_;
  State state_;
  std::optional<World> world_;
  std::unique_ptr<store::tcp::StoreServer> storeServer_;
  std::shared_ptr<store::Store> store_;
  std::unique_ptr<protocol::JobKeys> keys_;
  std::unique_ptr<protocol::FaultLog> faults_;
  std::unique_ptr<RankRegistry> registry_;
  std::unique_ptr<JobBarrier> barrier_;
  RestartStorm storm_;
  std::unique_ptr<BlackboxWatch> blackbox_;
  std::optional<protocol::StatusPageMapping> statusPage_;
  // Answers the monitor process's heartbeats (with a monitor process only).
  std::unique_ptr<RankLiveness> liveness_;
  // What the function said last: its last ping (monotonic ns) and how many
  // hang-protection guards are open (the health exchange ships both).
  std::atomic<uint64_t> lastPingNs_{0};
  std::atomic<int> hangProtectionOff_{0};
  HealthCheckFn restartChecks_;  // automatic checks + the user's, run at every restart
  Timeline timeline_;
  std::recursive_mutex atomicMutex_;

  // The current iteration.
  std::unique_ptr<Interruption> interruption_;
  std::unique_ptr<MonitorThread> monitor_;
  // The iteration's health comparison (active ranks, healthInterval > 0);
  // stopped with the monitor thread.
  std::unique_ptr<HealthExchange> health_;
  std::unique_ptr<Rendezvous> rendezvous_;
  mutable std::mutex commsMutex_;  // comms_ and userComms_: the abort runs on another thread
  std::map<std::string, CommunicatorPtr> comms_;
  std::vector<CommunicatorPtr> userComms_;
  // Set by abortIteration when a communicator's abort did not return within
  // finalizeTimeout (CUDA graphs holding it, a wedged driver): the rank
  // then leaves at its recovery (what, under commsMutex_).
  std::string abortHung_;
  // The abort of the communicator creation under way (CommunicatorSetup::
  // abortWith; under commsMutex_): a restart that begins meanwhile ends it.
  std::function<void()> creatingAbort_;
  // The previous iteration's communicators (for shrink) and the members that left.
  std::map<std::string, CommunicatorPtr> previousComms_;
  std::optional<World> previousWorld_;
  bool setUp_ = false;
  // Joiners (restart/loop/job/joiners.h) that the World holds: its slots
  // past the initial world size.
  int64_t admittedJoiners_ = 0;
  // A restart health check found that only a new process can go on.
  bool needsNewProcess_ = false;
  // The store restarted: what the rank puts back (store_restarts.h).
  std::shared_ptr<StoreRestarts> storeRestarts_;
  uint64_t restartsAtIteration_ = 0;  // storeRestarts_'s count as the iteration began
  uint64_t restartsAtRecovery_ = 0;   // ... as the recovery began
  uint64_t restartsAtPassage_ = 0;    // ... as this rank's iteration barrier completed
  RankIdentity identity_;
  int64_t joinerNumber_ = 0;  // this process's place among the joiners (0: none)
  // The verdict this rank followed last (iteration, its text).
  std::pair<int, std::string> lastVerdict_{-1, {}};
  struct Kept {
    bool ready = false;  // the identity is claimed
    // The last verdict, put back for a rank that has yet to read it (a late
    // spare): it must not decide anew from a store that lost the records.
    std::pair<int, std::string> verdict{-1, {}};
    int initialRank = 0;
    int iteration = 0;
    bool spare = false;
    std::vector<int> terminated;  // the World's terminated slots
    // Every terminated mark this rank read in the store (a spare's death is
    // in no World until the next restart; kept by the barrier as it reads).
    std::vector<int> terminatedSeen;
    int64_t joiners = 0;  // the queue's length this rank knows of
    // A joiner not admitted yet: it claims its identity back, never over
    // another's (restart/loop/job/joiners.h).
    bool waitingJoiner = false;
    // The latest admission of joiners this rank announced (kept by reassign
    // as it announces), which a joiner yet to read it waits for.
    std::optional<Admissions> announced;
  };
  std::mutex keptMutex_;
  Kept kept_;
};

}  // namespace resilient::restart
