#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <set>
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
#include "restart/loop/job/joiners.h"
#include "restart/loop/loop.h"
#include "restart/loop/options/options_from.h"
#include "restart/loop/sliced_wait.h"
#include "restart/monitor/spawn.h"
#include "restart/protocol/terminated_ranks.h"
#include "store/client_options.h"
#include "store/errors.h"
#include "store/open_store.h"
#include "store/prefix_view.h"
#include "store/tcp/server.h"

// The loop's setup: the rank's identity, the store, the job's keys and
// barriers, the monitor process, the world of an iteration.
namespace resilient::restart {

using protocol::FaultReason;
using protocol::FaultRecord;
using protocol::RankPhase;
using std::chrono::milliseconds;

namespace {

int intFromEnvironment(const char* name) {
  const char* text = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): read before any thread
  if (text == nullptr || *text == '\0') {
    throw ConfigError(std::string("the rank and world size come from Options or from ") + name +
                      ", which is not set");
  }
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value < 0 || value > (1 << 24)) {
    throw ConfigError(std::string(name) + "=\"" + text + "\" is not a rank or world size");
  }
  return static_cast<int>(value);
}

// "tcp://host:port[/prefix]" → port, or 0 when `url` is not a tcp:// URL.
uint16_t tcpPortOf(const std::string& url) {
  if (url.rfind("tcp://", 0) != 0) {
    return 0;
  }
  const size_t colon = url.find(':', 6);
  if (colon == std::string::npos) {
    return 0;
  }
  return static_cast<uint16_t>(std::strtoul(url.c_str() + colon + 1, nullptr, 10));
}

}  // namespace

Loop::Loop(Options options, LoopEnvironment environment)
    : options_(std::move(options)),
      environment_(std::move(environment)),
      storm_(StormPolicy{options_.stormLimit, options_.stormWindow, options_.restartBackoff,
                         options_.restartBackoffMax}) {
  options_.validate();
  state_.initialRank = options_.rank >= 0 ? options_.rank : intFromEnvironment("RANK");
  state_.initialWorldSize =
      options_.worldSize >= 0 ? options_.worldSize : intFromEnvironment("WORLD_SIZE");
  if (state_.initialWorldSize < 1 || state_.initialRank >= state_.initialWorldSize) {
    throw ConfigError("rank " + std::to_string(state_.initialRank) + " is not within a world of " +
                      std::to_string(state_.initialWorldSize));
  }
  state_.rank = state_.initialRank;
  state_.worldSize = state_.initialWorldSize;
}

Loop::~Loop() {
  if (storeRestarts_) {
    storeRestarts_->stop();
  }
  health_.reset();
  monitor_.reset();
  {
    std::lock_guard<std::mutex> lock(commsMutex_);
    comms_.clear();
    userComms_.clear();
  }
  previousComms_.clear();
  if (statusPage_ && state_.mode != Mode::kTerminated &&
      statusPage_->page().currentPhase() != RankPhase::kDone && !phaseTellsItsEnd()) {
    setPhase(RankPhase::kFailed);
  }
}

bool Loop::setup() {
  const bool joining =
      environment_.join.value_or(config::Params::global().get<config::kRestartJoin>());
  if (environment_.store) {
    if (options_.useMonitorProcess) {
      throw ConfigError(
          "a monitor process needs the store's URL: an injected store runs without one");
    }
    store_ = environment_.store;
    if (environment_.followStoreRestarts) {
      storeRestarts_ = std::make_shared<StoreRestarts>([this] { restoreStore(); });
      environment_.followStoreRestarts([restarts = storeRestarts_] { restarts->noteRestart(); });
    }
  } else {
    store::ClientOptions clientOptions = store::ClientOptions::fromParams();
    // A call that names no timeout of its own (a set, a get, a record) ends
    // within half the hard timeout: a rank blocked on a store that stopped
    // answering gets its error (and goes on to the next step, which shows
    // progress) before its monitor takes it for hung. Waits name their own
    // bounds and run in slices that show progress. (An etcd client needs its
    // member timeout, NCCL_RESILIENT_STORE_MEMBER_TIMEOUT_MS, to be shorter.)
    clientOptions.defaultTimeout = std::min(clientOptions.defaultTimeout, options_.hardTimeout / 2);
    // A TCP store restarted by the agent that hosts it is taken, and this
    // rank puts back its part of the job's state (restoreStore).
    storeRestarts_ = std::make_shared<StoreRestarts>([this] { restoreStore(); });
    clientOptions.followRestarts = true;
    clientOptions.onServerRestart = [restarts = storeRestarts_] { restarts->noteRestart(); };
    if (options_.hostStore && state_.initialRank == 0 && !joining) {
      const uint16_t port = tcpPortOf(options_.storeUrl);
      if (port == 0) {
        throw ConfigError("hostStore needs a tcp://host:port store URL with a port, not \"" +
                          options_.storeUrl + "\"");
      }
      store::tcp::ServerOptions server;
      server.port = port;
      server.token = clientOptions.token;
      storeServer_ = std::make_unique<store::tcp::StoreServer>(server);
    }
    store_ = store::openStore(options_.storeUrl, clientOptions);
  }
  keys_ = std::make_unique<protocol::JobKeys>(options_.jobId);
  faults_ = std::make_unique<protocol::FaultLog>(*store_, *keys_);
  registry_ = std::make_unique<RankRegistry>(*store_, *keys_, state_.initialWorldSize);
  makeBarrier();
  // A C++ Options left empty means the plugins' directory: without it the
  // loop watched no blackbox (no plugin fault, no health sample).
  blackbox_ = std::make_unique<BlackboxWatch>(blackboxDirOf(options_));
  std::vector<HealthCheckFn> checks{options_.healthCheck};  // the last runs first
  if (options_.automaticHealthChecks) {
    checks.push_back(nicHealthCheck());  // its counters' baseline is taken now
    if (nvmlAvailable()) {
      checks.push_back(gpuRecoveryCheck());
    }
    if (cudaAvailable()) {
      checks.push_back(cudaHealthCheck());
    }
  }
  restartChecks_ = composeHealthChecks(std::move(checks));
  if (joining) {
    return join();
  }

  // Claimed before the monitor process starts: a job id in use stops this
  // rank before anything of it is in the store or running.
  identity_ = RankIdentity::ofThisProcess();
  registry_->claim(state_.initialRank, identity_);
  if (options_.useMonitorProcess) {
    startMonitorProcess();
    identity_.monitorPid = statusPage_->page().monitorPid.load();
    registry_->publish(state_.initialRank, identity_);
  }
  keepForRestore();
  timeline_.record(0, "started", store_->describe());

  setPhase(RankPhase::kInitialBarrier);
  barrier_->wait(keys_->initialBarrier(), 0, options_.barrierTimeout, {});
  timeline_.record(0, "initial barrier");

  // Every rank must compute the same first World, so it depends on nothing
  // that may change while the ranks leave the barrier: a rank that died
  // already is found by iteration 0's fault path (its monitor's record).
  World initial(state_.initialWorldSize);
  AssignmentContext context;
  context.firstIteration = true;
  context.key = [this](int initialRank) { return registry_->hostOf(initialRank); };
  world_ = assignRanks(initial, *options_.rankAssignment, context);
  setUp_ = true;
  return true;
}

bool Loop::join() {
  // A process that cannot run takes no place: its health check comes first,
  // and a failure leaves without a record (it is in no World).
  try {
    runBounded("health check", restartChecks_, options_.healthCheckTimeout);
  } catch (...) {
    leave(std::current_exception(), /*recordInStore=*/false);
  }
  identity_ = RankIdentity::ofThisProcess();
  const JoinerTicket ticket =
      registerJoiner(*store_, *keys_, *registry_, state_.initialWorldSize, identity_);
  state_.initialRank = ticket.initialRank;
  state_.rank = -1;
  makeBarrier();  // it arrives as its new initial rank
  joinerNumber_ = ticket.number;
  if (options_.useMonitorProcess) {
    startMonitorProcess(/*joining=*/true);
    const RankIdentity claimed = identity_;
    identity_.monitorPid = statusPage_->page().monitorPid.load();
    // Over its own claim only: a rank put back since holds it (the wait
    // below finds that out).
    registry_->replace(state_.initialRank, claimed, identity_);
  }
  keepForRestore();
  setPhase(RankPhase::kJoining);
  timeline_.record(0, "joining",
                   "initial rank " + std::to_string(state_.initialRank) + ", joiner " +
                       std::to_string(ticket.number) + "; " + store_->describe());
  // Waiting is not hanging: every slice shows progress to the monitor.
  JoinerWait wait = waitForAdmission(*store_, *keys_, *registry_, ticket, identity_,
                                     std::chrono::milliseconds(100), [this] { touchProgress(); });
  if (wait.end == JoinerWait::End::kNotNeeded) {
    timeline_.record(0, "not needed", "the job finished before it admitted this process");
    setPhase(RankPhase::kDone);
    return false;
  }
  if (wait.end == JoinerWait::End::kWithdrawn) {
    withdraw(wait.why);
  }
  state_.iteration = wait.admission.iteration;
  world_ = std::move(wait.admission.world);
  previousWorld_ = std::move(wait.admission.previous);
  admittedJoiners_ = world_->initialWorldSize() - state_.initialWorldSize;
  if (state_.initialRank >= world_->initialWorldSize()) {
    throw InternalError("joiner " + std::to_string(ticket.number) +
                        " was admitted into iteration " + std::to_string(state_.iteration) +
                        " whose World has " + std::to_string(world_->initialWorldSize()) +
                        " slots");
  }
  // The job's recent restarts, as its other ranks count them: a joiner may
  // write the storm verdict of the next one (the first proposal decides), and
  // a storm must not look like a fresh start to it. Every iteration before
  // this one ended in a restart; its first record dates it.
  const int64_t monoMinusWallMs =
      static_cast<int64_t>(monotonicNs() / 1000000) - static_cast<int64_t>(wallClockNs() / 1000000);
  const int remembered = options_.stormLimit > 0 ? options_.stormLimit + 1 : 31;
  for (int i = std::max(0, state_.iteration - remembered); i < state_.iteration; ++i) {
    const std::vector<FaultRecord> records = faults_->recordsOf(i);
    uint64_t first = UINT64_MAX;
    for (const FaultRecord& r : records) {
      first = std::min(first, r.wallNs);
    }
    if (!records.empty()) {
      storm_.remember(i, static_cast<int64_t>(first / 1000000) + monoMinusWallMs, records);
    }
  }
  timeline_.record(state_.iteration, "admitted",
                   "initial rank " + std::to_string(state_.initialRank));
  setUp_ = true;
  return true;
}

void Loop::makeBarrier() {
  barrier_ = std::make_unique<JobBarrier>(
      *store_, *keys_,
      JobBarrierOptions{.initialRank = state_.initialRank,
                        .worldSize = state_.initialWorldSize,
                        .chunk = std::min(options_.monitorThreadInterval, milliseconds(100)),
                        .storeSilence = options_.barrierTimeout,
                        .progress = [this] { touchProgress(); },
                        .terminatedSeen =
                            [this](const std::set<int>& ranks) {
                              std::lock_guard<std::mutex> lock(keptMutex_);
                              kept_.terminatedSeen.assign(ranks.begin(), ranks.end());
                            }});
}

void Loop::startMonitorProcess(bool joining) {
  if (options_.storeUrl.empty() || options_.storeUrl == "memory") {
    throw ConfigError("a monitor process needs a store it can reach (tcp:// or etcd://), not \"" +
                      options_.storeUrl + "\"; set useMonitorProcess=false to run without one");
  }
  statusPage_.emplace(protocol::StatusPageMapping::create(state_.initialRank));
  if (joining) {
    // Before the monitor reads it: an end from now on is a joiner's.
    statusPage_->page().spare.store(1, std::memory_order_release);
    statusPage_->page().phase.store(static_cast<uint32_t>(RankPhase::kJoining),
                                    std::memory_order_release);
  }
  monitor::MonitorConfig config;
  config.statusFd = statusPage_->fd();
  config.storeUrl = options_.storeUrl;
  config.jobId = options_.jobId;
  config.rank = state_.initialRank;
  config.worldSize = state_.initialWorldSize;
  config.interval = options_.monitorProcessInterval;
  config.heartbeatInterval = options_.heartbeatInterval;
  config.heartbeatTimeout = options_.heartbeatTimeout;
  config.softTimeout = options_.softTimeout;
  config.hardTimeout = options_.hardTimeout;
  config.barrierTimeout = options_.barrierTimeout;
  config.grace = options_.terminationGraceTime;
  config.logFile = options_.monitorLogFile;
  config.pidFile = options_.monitorPidFile;
  config.blackboxDir = blackboxDirOf(options_);
  liveness_ = std::make_unique<RankLiveness>();
  config.livenessFd = liveness_->monitorEnd();
  const pid_t pid = monitor::spawnMonitor(config, options_.monitorExecutable);
  liveness_->start();
  statusPage_->page().monitorPid.store(pid, std::memory_order_release);
  timeline_.record(0, "monitor process", "pid " + std::to_string(pid));
}

void Loop::applyWorld() {
  const int slots = world_->initialWorldSize();
  barrier_->setWorldSize(slots);
  registry_->setWorldSize(slots);
  const RankSlot& slot = world_->at(state_.initialRank);
  state_.rank = slot.rank;
  state_.mode = slot.mode;
  state_.activeRank = slot.activeRank;
  state_.worldSize = world_->worldSize();
  state_.activeWorldSize = world_->activeWorldSize();
  const bool spare = state_.mode == Mode::kInactive;
  if (spare) {
    // For a sibling's monitor that finds this rank's node gone (its own
    // monitor reads the status page).
    store_->set(keys_->spare(state_.iteration, state_.initialRank), "1");
  }
  if (statusPage_) {
    statusPage_->page().slots.store(slots, std::memory_order_release);
    statusPage_->page().spare.store(spare ? 1 : 0, std::memory_order_release);
  }
  if (environment_.setProcessEnvironment) {
    setDistributedEnvironment(state_);
  }
  timeline_.record(state_.iteration, "assigned", state_.describe());
  keepForRestore();
}

void Loop::keepForRestore() {
  Kept kept;
  kept.ready = true;
  kept.verdict = lastVerdict_;
  kept.initialRank = state_.initialRank;
  kept.iteration = state_.iteration;
  kept.joiners = std::max(admittedJoiners_, joinerNumber_);
  kept.waitingJoiner = joinerNumber_ > 0 && !world_;
  if (world_) {
    kept.spare = world_->at(state_.initialRank).mode == Mode::kInactive;
    for (int r = 0; r < world_->initialWorldSize(); ++r) {
      if (world_->terminated(r)) {
        kept.terminated.push_back(r);
      }
    }
  }
  std::lock_guard<std::mutex> lock(keptMutex_);
  kept.announced = std::move(kept_.announced);
  kept.terminatedSeen = std::move(kept_.terminatedSeen);
  kept_ = std::move(kept);
}

void Loop::restoreStore() noexcept {
  Kept kept;
  {
    std::lock_guard<std::mutex> lock(keptMutex_);
    kept = kept_;
  }
  if (!kept.ready) {
    return;  // nothing of this rank in the store yet: setup writes it
  }
  try {
    if (kept.waitingJoiner) {
      registry_->tryClaim(kept.initialRank, identity_);
    } else {
      registry_->publish(kept.initialRank, identity_);
    }
    std::set<int> terminated(kept.terminated.begin(), kept.terminated.end());
    terminated.insert(kept.terminatedSeen.begin(), kept.terminatedSeen.end());
    for (const int r : terminated) {
      protocol::markTerminated(*store_, *keys_, r, "terminated (put back: the store restarted)");
    }
    // The joiners' queue is at least as long as the joiners this rank knows
    // of, so that a new joiner does not take an initial rank in use.
    raiseJoinerCount(*store_, *keys_, kept.joiners);
    if (kept.spare) {
      store_->set(keys_->spare(kept.iteration, kept.initialRank), "1");
    }
    if (const auto& a = kept.announced) {
      announceAdmissions(*store_, *keys_, *a);
    }

    if (kept.verdict.first >= 0) {
      // Over a claim (of a rank that saw the restart during its claim: it
      // computes nothing), never over a verdict: the one verdict of an
      // iteration on the new instance is the one some rank followed.
      const std::string key = keys_->verdict(kept.verdict.first);
      std::optional<std::string> current = store_->get(key);
      while (!isVerdictText(current)) {
        const store::CasResult put = store_->compareSet(key, current, kept.verdict.second);
        if (put.swapped) {
          break;
        }
        current = put.current;
      }
      store_->set(keys_->verdictReady(kept.verdict.first), "1");
    }
    RES_WARN(log::kRestart,
             "restart: the job's store restarted empty; rank %d put back its identity, %zu "
             "terminated ranks and the joiners' queue (%lld)",
             kept.initialRank, kept.terminated.size(), static_cast<long long>(kept.joiners));
    timeline_.record(kept.iteration, "store restored",
                     std::to_string(kept.terminated.size()) + " terminated ranks put back");
  } catch (const std::exception& e) {
    RES_WARN(log::kRestart,
             "restart: the job's store restarted empty; rank %d could not put "
             "its state back: %s",
             kept.initialRank, e.what());
  }
}

}  // namespace resilient::restart
