#include "restart/loop/loop.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/log.h"
#include "resilient/restart/health.hpp"
#include "restart/comm/store_rendezvous.h"
#include "restart/hooks/bounded_call.h"
#include "restart/loop/behind_ranks.h"
#include "restart/loop/culprits.h"
#include "restart/loop/sliced_wait.h"
#include "restart/monitor/spawn.h"
#include "restart/protocol/terminated_ranks.h"
#include "store/client_options.h"
#include "store/errors.h"
#include "store/open_store.h"
#include "store/prefix_view.h"
#include "store/tcp/server.h"

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

std::string describeException(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

// The iteration's rendezvous as the communicator factories (and the user)
// see it: the waits run in slices, and a fault raised meanwhile -- e.g. a rank
// whose initialize or health check failed before it made its communicators,
// so that its handles never come -- ends them with RankShouldRestart instead
// of at the communicator timeout. Repeating an all-gather slice sets this
// rank's own key again with the same value, which is harmless.
class InterruptibleRendezvous final : public Rendezvous {
 public:
  InterruptibleRendezvous(std::unique_ptr<Rendezvous> inner, const Interruption& interruption,
                          milliseconds slice)
      : inner_(std::move(inner)), interruption_(interruption), slice_(slice) {}

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

 private:
  template <class F>
  auto sliced(milliseconds timeout, const std::string& what, F&& wait)
      -> std::invoke_result_t<F&, milliseconds> {
    using Result = std::invoke_result_t<F&, milliseconds>;
    return waitInSlices<TimeoutError>(
        timeout, slice_, [&](const auto& sliceTime) { return wait(sliceTime()); },
        [&] {
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
};

}  // namespace

Loop::Loop(Options options, LoopEnvironment environment)
    : options_(std::move(options)), environment_(std::move(environment)) {
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
  monitor_.reset();
  {
    std::lock_guard<std::mutex> lock(commsMutex_);
    comms_.clear();
    userComms_.clear();
  }
  previousComms_.clear();
  if (statusPage_ && state_.mode != Mode::kTerminated &&
      statusPage_->page().currentPhase() != RankPhase::kDone) {
    setPhase(RankPhase::kFailed);
  }
}

// ---- setup --------------------------------------------------------------------

void Loop::setup() {
  if (environment_.store) {
    if (options_.useMonitorProcess) {
      throw ConfigError(
          "a monitor process needs the store's URL: an injected store runs without one");
    }
    store_ = environment_.store;
  } else {
    const store::ClientOptions clientOptions = store::ClientOptions::fromParams();
    if (options_.hostStore && state_.initialRank == 0) {
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
  barrier_ =
      std::make_unique<JobBarrier>(*store_, *keys_, state_.initialRank, state_.initialWorldSize,
                                   std::min(options_.monitorThreadInterval, milliseconds(100)));
  blackbox_ = std::make_unique<BlackboxWatch>(options_.blackboxDir);
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

  // Claimed before the monitor process starts: a job id in use stops this
  // rank before anything of it is in the store or running.
  RankIdentity identity = RankIdentity::ofThisProcess();
  registry_->claim(state_.initialRank, identity);
  if (options_.useMonitorProcess) {
    startMonitorProcess();
    identity.monitorPid = statusPage_->page().monitorPid.load();
    registry_->publish(state_.initialRank, identity);
  }
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
}

void Loop::startMonitorProcess() {
  if (options_.storeUrl.empty() || options_.storeUrl == "memory") {
    throw ConfigError("a monitor process needs a store it can reach (tcp:// or etcd://), not \"" +
                      options_.storeUrl + "\"; set useMonitorProcess=false to run without one");
  }
  statusPage_.emplace(protocol::StatusPageMapping::create(state_.initialRank));
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
  config.blackboxDir = options_.blackboxDir;
  const pid_t pid = monitor::spawnMonitor(config, options_.monitorExecutable);
  statusPage_->page().monitorPid.store(pid, std::memory_order_release);
  timeline_.record(0, "monitor process", "pid " + std::to_string(pid));
}

void Loop::applyWorld() {
  const RankSlot& slot = world_->at(state_.initialRank);
  state_.rank = slot.rank;
  state_.mode = slot.mode;
  state_.activeRank = slot.activeRank;
  state_.worldSize = world_->worldSize();
  state_.activeWorldSize = world_->activeWorldSize();
  if (environment_.setProcessEnvironment) {
    setDistributedEnvironment(state_);
  }
  timeline_.record(state_.iteration, "assigned", state_.describe());
}

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
  setup();
  for (;;) {
    applyWorld();
    if (runIteration(fn) == Outcome::kCompleted) {
      finish();
      return;
    }
    recover();
  }
}

Loop::Outcome Loop::runIteration(const std::function<void(CallContext&)>& fn) {
  const int k = state_.iteration;
  interruption_ = std::make_unique<Interruption>();
  blackbox_->setFailFast(false);
  blackbox_->skipSeen();
  setPhase(RankPhase::kRunning);
  MonitorThreadConfig config;
  config.iteration = k;
  config.initialRank = state_.initialRank;
  config.storeWaitChunk = options_.monitorThreadInterval;
  config.progressInterval = options_.progressWatchdogInterval;
  config.lastCallWait = options_.lastCallWait;
  monitor_ =
      std::make_unique<MonitorThread>(*store_, *keys_, *faults_, *registry_, *blackbox_,
                                      *interruption_, statusPage_ ? &statusPage_->page() : nullptr,
                                      atomicMutex_, config, [this] { abortIteration(); });

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
      createCommunicators();
      timeline_.record(k, "function entered");
      fn(ctx);
      timeline_.record(k, "function returned");
    }
    setPhase(RankPhase::kCompleting);
    if (state_.active()) {
      barrier_->wait(keys_->completionBarrier(), static_cast<uint64_t>(k),
                     options_.completionTimeout, [this] { return interrupted(); });
    } else {
      // A spare waits as long as the active ranks compute (no completion
      // timeout applies to it), shows progress to its monitor meanwhile (a
      // healthy spare is not hung), and notices an interruption within a
      // short slice so that it does not hold up everyone's recovery.
      barrier_->wait(
          keys_->completionBarrier(), static_cast<uint64_t>(k), kSpareWait,
          [this] {
            touchProgress();
            return interrupted();
          },
          false, kSpareSlice);
    }
    monitor_.reset();
    return Outcome::kCompleted;
  } catch (const RankShouldRestart&) {
    // Someone else's fault: already published.
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
      *interruption_, std::min(options_.monitorThreadInterval, milliseconds(100)));
  std::vector<int> removed;
  bool onlyRemovals = previousWorld_.has_value();
  if (previousWorld_) {
    // Members of the previous communicators (its active ranks) that are not
    // active now, by their rank in it; any newcomer or reordering rules out
    // a shrink.
    for (int r = 0; r < state_.initialWorldSize; ++r) {
      const RankSlot& before = previousWorld_->at(r);
      const RankSlot& now = world_->at(r);
      if (before.mode == Mode::kActive && now.mode != Mode::kActive) {
        removed.push_back(before.activeRank);
      } else if (now.mode == Mode::kActive && before.mode != Mode::kActive) {
        onlyRemovals = false;
      }
    }
    std::sort(removed.begin(), removed.end());
  }
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
                            options_.communicatorTimeout};
    CommunicatorPtr comm = factory(setup);
    if (!comm) {
      throw RestartError("communicator factory \"" + name + "\" returned no communicator");
    }
    std::lock_guard<std::mutex> lock(commsMutex_);
    comms_[name] = comm;
    if (interruption_->cancelled()) {
      comm->abort();  // the abort ran before this one existed
    }
  }
  previousComms_.clear();
  timeline_.record(state_.iteration, "communicators ready",
                   std::to_string(options_.communicators.size()) + " made");
}

void Loop::abortIteration() noexcept {
  const int k = state_.iteration;
  timeline_.recordAt(interruption_->raisedNs(), k, "fault detected", interruption_->reason());
  timeline_.record(k, "abort begun");
  blackbox_->setFailFast(true);
  std::vector<CommunicatorPtr> targets;
  {
    std::lock_guard<std::mutex> lock(commsMutex_);
    for (const auto& [name, comm] : comms_) {
      targets.push_back(comm);
    }
    targets.insert(targets.end(), userComms_.begin(), userComms_.end());
  }
  for (const CommunicatorPtr& comm : targets) {
    comm->abort();
  }
  if (options_.abort) {
    try {
      options_.abort(state_);
    } catch (const std::exception& e) {
      RES_WARN(log::kRestart, "restart: the user's abort failed: %s", e.what());
    } catch (...) {
      RES_WARN(log::kRestart, "restart: the user's abort threw a non-standard exception");
    }
  }
  timeline_.record(k, "abort done", std::to_string(targets.size()) + " communicators aborted");
}

void Loop::publish(FaultReason reason, const std::string& detail, int culprit) {
  FaultRecord r;
  r.iteration = state_.iteration;
  r.reason = reason;
  r.reporter = state_.initialRank;
  r.subject = state_.initialRank;
  r.culprit = culprit;
  r.detail = detail;
  publishAndRaise(*faults_, r, *interruption_);
}

// ---- after a fault ------------------------------------------------------------

void Loop::runBounded(const char* what, const std::function<void(const State&)>& hook,
                      milliseconds timeout) {
  if (!hook) {
    return;
  }
  const State snapshot = state_;
  detail::runBounded(timeout, what, "resilient-hook", [hook, snapshot] { hook(snapshot); });
}

void Loop::recover() {
  const int k = state_.iteration;
  interruption_->raise("the iteration failed");
  while (!interruption_->waitAborted(milliseconds(1000))) {
  }
  monitor_.reset();
  setPhase(RankPhase::kRestarting);
  bool healthy = true;
  std::string unhealthy;
  try {
    runBounded("finalize", options_.finalize, options_.finalizeTimeout);
    timeline_.record(k, "finalized");
  } catch (...) {
    healthy = false;
    unhealthy = "finalize failed: " + describeException(std::current_exception());
  }
  {
    std::lock_guard<std::mutex> lock(commsMutex_);
    previousComms_ = std::move(comms_);
    comms_.clear();
    userComms_.clear();
  }
  rendezvous_.reset();
  if (healthy) {
    try {
      runBounded("health check", restartChecks_, options_.healthCheckTimeout);
      timeline_.record(k, "health checked");
    } catch (...) {
      healthy = false;
      unhealthy = "health check failed: " + describeException(std::current_exception());
    }
  }
  if (!healthy) {
    publish(FaultReason::kHealthCheck, unhealthy, state_.initialRank);
    leave(std::make_exception_ptr(HealthCheckError(unhealthy)));
  }

  // What this rank's communicators had enqueued, for "who is behind".
  const CommProgress progress = commProgressOf(*blackbox_);
  if (!progress.empty()) {
    publishCommProgress(*store_, *keys_, k, state_.initialRank, progress);
  }

  setPhase(RankPhase::kIterationBarrier);
  for (;;) {
    // Between slices: a culprit the records already name (once the window
    // for concurrent faults has passed) is terminated now, and so counted,
    // rather than when its monitor's hard timeout kills it.
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
                       terminateNamedCulprits, true);
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

  const std::vector<FaultRecord> records = faults_->recordsOf(k);
  std::set<int> terminated = barrier_->terminated();
  std::set<int> culprits = culpritsOf(records, options_.lastCallWait);
  const bool hang = std::any_of(records.begin(), records.end(), [](const FaultRecord& r) {
    return r.reason == FaultReason::kCollectiveHung || r.reason == FaultReason::kSoftTimeout;
  });
  if (hang) {
    std::vector<int> live;
    for (int r = 0; r < state_.initialWorldSize; ++r) {
      if (terminated.count(r) == 0) {
        live.push_back(r);
      }
    }
    for (const int r : behindRanks(readCommProgress(*store_, *keys_, k, live))) {
      culprits.insert(r);
    }
  }
  std::string culpritText;
  for (const int c : culprits) {
    culpritText += (culpritText.empty() ? "" : ", ") + std::to_string(c);
  }
  timeline_.record(k, "culprits", culprits.empty() ? "none named" : "ranks " + culpritText);
  if (options_.terminateCulprits) {
    for (const int c : culprits) {
      if (terminated.insert(c).second) {
        barrier_->markTerminated(c, "culprit");
      }
    }
  }
  if (terminated.count(state_.initialRank) != 0) {
    leave(std::make_exception_ptr(RankDiscarded(
        "rank " + std::to_string(state_.initialRank) + " was terminated in iteration " +
        std::to_string(k) +
        (culprits.count(state_.initialRank) != 0 ? " as the culprit of a fault" : ""))));
  }
  state_.culprit = culprits.count(state_.initialRank) != 0;

  AssignmentContext context;
  context.key = [this](int initialRank) { return registry_->hostOf(initialRank); };
  for (const int r : terminated) {
    if (!world_->terminated(r)) {
      context.terminated.push_back(r);
    }
  }
  previousWorld_ = world_;
  world_ = assignRanks(*world_, *options_.rankAssignment, context);
  state_.iteration = k + 1;
  timeline_.record(state_.iteration, "reassigned",
                   std::to_string(context.terminated.size()) + " ranks terminated");
  if (world_->terminated(state_.initialRank)) {
    leave(std::make_exception_ptr(RankDiscarded("the rank assignment terminated rank " +
                                                std::to_string(state_.initialRank))));
  }
}

void Loop::finish() {
  const int k = state_.iteration;
  timeline_.record(k, "completed");
  if (options_.completion) {
    options_.completion(state_);
  }
  barrier_->wait(keys_->terminationBarrier(), 0, options_.barrierTimeout, {});
  setPhase(RankPhase::kDone);
}

void Loop::leave(std::exception_ptr why) {
  monitor_.reset();
  barrier_->markTerminated(state_.initialRank, "left: " + describeException(why));
  state_.mode = Mode::kTerminated;
  setPhase(RankPhase::kFailed);
  timeline_.record(state_.iteration, "terminated", describeException(why));
  if (options_.terminate) {
    try {
      options_.terminate(state_);
    } catch (const std::exception& e) {
      RES_WARN(log::kRestart, "restart: the terminate hook failed: %s", e.what());
    }
  }
  std::rethrow_exception(why);
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

std::set<int> Loop::settledCulprits(int iteration) {
  const std::vector<FaultRecord> records = faults_->recordsOf(iteration);
  if (records.empty()) {
    return {};
  }
  uint64_t first = records.front().wallNs;
  for (const FaultRecord& r : records) {
    first = std::min(first, r.wallNs);
  }
  const auto windowNs = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(options_.lastCallWait).count());
  if (wallClockNs() <= first + windowNs) {
    return {};  // concurrent faults may still arrive
  }
  return culpritsOf(records, options_.lastCallWait);
}

bool Loop::interrupted() const {
  return interruption_ && interruption_->raised();
}

void Loop::ping() noexcept {
  if (statusPage_) {
    statusPage_->page().manualPingNs.store(monotonicNs(), std::memory_order_release);
  }
}

void Loop::hangProtection(bool off) noexcept {
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
