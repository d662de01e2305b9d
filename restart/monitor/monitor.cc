#include "restart/monitor/monitor.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <exception>
#include <thread>

#include "common/clock.h"
#include "common/log.h"
#include "plugin/net/fault.h"
#include "plugin/net/liveness/stream_link.h"
#include "restart/monitor/post_mortem.h"
#include "store/errors.h"

namespace resilient::restart::monitor {

using protocol::FaultReason;
using protocol::RankPhase;

namespace {

uint64_t toNs(Millis ms) {
  return static_cast<uint64_t>(ms.count()) * 1000000;
}

int64_t toMs(uint64_t ns) {
  return static_cast<int64_t>(ns / 1000000);
}

// One store call may take this long: enough for a loaded store, short
// enough that the checks keep their pace.
store::Timeout callTimeoutFor(const MonitorConfig& c) {
  return std::min(c.storeTimeout, std::max(2 * c.interval, Millis(1000)));
}

// Errors that no retry cures.
bool permanent(const store::StoreError& e) {
  return e.code() == store::StoreErrc::kInvalidArgument ||
         e.code() == store::StoreErrc::kBarrierOverflow ||
         e.code() == store::StoreErrc::kAuthRefused || e.code() == store::StoreErrc::kClosed;
}

}  // namespace

Monitor::Monitor(const MonitorConfig& config, store::Store& store, protocol::StatusPage& page,
                 MonitorLog& log, const std::atomic<uint64_t>* storeRestarts)
    : config_(config),
      storeRestarts_(storeRestarts),
      store_(store),
      page_(page),
      log_(log),
      keys_(config.jobId),
      startNs_(monotonicNs()),
      callTimeout_(callTimeoutFor(config)),
      publisher_(store, keys_, {.reporter = config.rank, .callTimeout = callTimeout_}),
      heartbeat_(store, keys_.heartbeat(config.rank),
                 {.interval = config.heartbeatInterval,
                  .ttl = config.heartbeatTimeout,
                  .callTimeout = callTimeout_}),
      sibling_(store, keys_,
               {.self = config.rank,
                .worldSize = config.worldSize,
                .heartbeatTimeout = config.heartbeatTimeout,
                .startMonoNs = startNs_,
                .callTimeout = callTimeout_,
                .storeRestarts = storeRestarts,
                .slots = &page.slots}),
      timeouts_(config.softTimeout, config.hardTimeout, config.barrierTimeout, startNs_),
      rank_(static_cast<pid_t>(page.rankPid.load(std::memory_order_acquire))) {
  if (config.livenessFd >= 0) {
    liveness_.emplace(
        net::liveness::thisProcessPolicy(), config.livenessFd,
        "rank " + std::to_string(config.rank) + " (pid " + std::to_string(rank_.pid()) + ")", page,
        [pid = rank_.pid()] { return RankProcess::exiting(pid); });
  }
}

protocol::FaultRecord Monitor::record(FaultReason reason, int subject,
                                      const std::string& detail) const {
  protocol::FaultRecord r;
  r.iteration = page_.iteration.load(std::memory_order_acquire);
  r.reason = reason;
  r.subject = subject;
  r.culprit = reason == FaultReason::kMonitorProcess ? -1 : subject;
  r.detail = detail;
  return r;
}

template <typename Fn>
void Monitor::retrying(const char* what, uint64_t deadline, Fn&& step) {
  for (;;) {
    try {
      step();
      return;
    } catch (const store::StoreError& e) {
      if (permanent(e) || monotonicNs() >= deadline) {
        log_.write("%s failed: %s", what, e.what());
        throw;
      }
    }
    std::this_thread::sleep_for(std::min(config_.interval, Millis(50)));
  }
}

int Monitor::run() {
  page_.monitorPid.store(::getpid(), std::memory_order_release);
  log_.write(
      "watching rank %d (pid %d, %s) of job %s in %s, world size %d; interval %lld ms, "
      "heartbeat %lld/%lld ms, soft %lld ms, hard %lld ms, barrier %lld ms, grace %lld ms",
      config_.rank, static_cast<int>(rank_.pid()), rank_.usesPidfd() ? "pidfd" : "probed",
      config_.jobId.c_str(), store_.describe().c_str(), config_.worldSize,
      static_cast<long long>(config_.interval.count()),
      static_cast<long long>(config_.heartbeatInterval.count()),
      static_cast<long long>(config_.heartbeatTimeout.count()),
      static_cast<long long>(config_.softTimeout.count()),
      static_cast<long long>(config_.hardTimeout.count()),
      static_cast<long long>(config_.barrierTimeout.count()),
      static_cast<long long>(config_.grace.count()));
  if (rank_.pid() <= 0) {
    return fail("the status page names no rank process (pid " + std::to_string(rank_.pid()) + ")");
  }
  try {
    for (;;) {
      if (page_.currentPhase() == RankPhase::kDone) {
        return cleanExit("its rank is done");
      }
      if (page_.currentPhase() == RankPhase::kWithdrawn) {
        return quietExit();
      }
      if (rank_.ended()) {
        return onRankEnded(RankEnd::kByItself);
      }
      const uint64_t now = monotonicNs();
      if (liveness_) {
        if (const int code = watchLiveness(); code >= 0) {
          return code;
        }
      }
      int exitCode = 0;
      try {
        if (tick(now, &exitCode)) {
          return exitCode;
        }
        storeFailingSinceNs_ = 0;
      } catch (const store::StoreError& e) {
        if (permanent(e)) {
          return fail(std::string("the store refused a call: ") + e.what());
        }
        // An unreachable store stops the heartbeat and the records, not the
        // watch: tick() has enforced the rank's timeouts all the same, and
        // goes on doing so for as long as the rank lives.
        if (storeFailingSinceNs_ == 0) {
          storeFailingSinceNs_ = now;
          storeReportedNs_ = now;
          log_.write("store call failed (retrying; the rank's timeouts are still enforced): %s",
                     e.what());
        } else if (now - storeReportedNs_ >= toNs(config_.storeTimeout)) {
          storeReportedNs_ = now;
          log_.write("the store has failed for %lld ms: %s",
                     static_cast<long long>(toMs(now - storeFailingSinceNs_)), e.what());
        }
      }
      // Sleep on the rank's end until the next check or heartbeat is due.
      const uint64_t after = monotonicNs();
      uint64_t due = nextCheckNs_;
      if (heartbeat_.nextDueNs() != 0) {
        due = std::min(due, heartbeat_.nextDueNs());
      }
      if (storeFailingSinceNs_ != 0) {
        due = std::min(due, after + toNs(std::min(config_.interval, Millis(50))));
      }
      const uint64_t waitNs = due > after ? due - after : 0;
      rank_.waitForEnd(Millis((waitNs + 999999) / 1000000),
                       liveness_ && !linkEndLogged_ ? liveness_->wakeFd() : -1);
    }
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}

bool Monitor::tick(uint64_t nowNs, int* exitCode) {
  // The rank's timeouts are judged from its status page alone: a store that
  // fails (the heartbeat, the soft timeout's records) does not keep the
  // hard timeout from being enforced; its error is raised after the checks.
  std::exception_ptr storeFailure;
  try {
    heartbeat_.beatIfDue(nowNs);
  } catch (const store::StoreError&) {
    storeFailure = std::current_exception();
  }
  if (nowNs >= nextCheckNs_) {
    nextCheckNs_ = nowNs + toNs(config_.interval);
    const ProgressView view = ProgressView::of(page_);
    switch (timeouts_.check(view, monotonicNs())) {
      case TimeoutAction::kHard:
        *exitCode = enforceHardTimeout(view, timeouts_.idleNs(view, monotonicNs()));
        return true;
      case TimeoutAction::kSoft:
        try {
          enforceSoftTimeout(view, timeouts_.idleNs(view, monotonicNs()));
        } catch (const store::StoreError&) {
          storeFailure = std::current_exception();  // not marked done: tried again next check
        }
        break;
      case TimeoutAction::kNone: break;
    }
    if (!storeFailure) {
      checkSibling(nowNs);
    }
  }
  if (storeFailure) {
    std::rethrow_exception(storeFailure);
  }
  return false;
}

void Monitor::enforceSoftTimeout(const ProgressView& view, uint64_t idleNs) {
  const std::string detail = "no progress for " + std::to_string(toMs(idleNs)) + " ms in phase " +
                             protocol::rankPhaseName(view.phase) + " (soft timeout " +
                             std::to_string(config_.softTimeout.count()) + " ms)";
  protocol::FaultRecord r = record(FaultReason::kSoftTimeout, config_.rank, detail);
  r.iteration = view.iteration;
  const int64_t index = publisher_.publish(r);
  publisher_.markInterrupted(view.iteration, FaultReason::kSoftTimeout);
  timeouts_.softDone(view.iteration);
  page_.softTimeouts.fetch_add(1, std::memory_order_acq_rel);
  log_.write("soft timeout in iteration %d: %s (fault %lld)", view.iteration, detail.c_str(),
             static_cast<long long>(index));
}

int Monitor::enforceHardTimeout(const ProgressView& view, uint64_t idleNs) {
  const std::string detail = "no progress for " + std::to_string(toMs(idleNs)) + " ms in phase " +
                             protocol::rankPhaseName(view.phase) + " (hard timeout " +
                             std::to_string(toMs(timeouts_.hardLimitNs(view.phase))) +
                             " ms); pid " + std::to_string(rank_.pid()) + " killed";
  return terminate(FaultReason::kHardTimeout, "hard timeout", detail, view.iteration,
                   /*graceful=*/true);
}

int Monitor::watchLiveness() {
  if (liveness_->exiting() && !rank_.ended()) {
    // Killed (or exiting) but not yet torn down: it runs none of its code
    // again, so it is dead now, not when the kernel is done with it.
    return onRankEnded(RankEnd::kExiting);
  }
  if (const std::optional<LivenessWatch::Verdict> v = liveness_->verdict()) {
    if (rank_.ended()) {
      return -1;  // a rank that ended goes the way of every death
    }
    // Named in the net plugin's words (net::describe of its liveness fault).
    const net::RootCause root{net::FaultClass::kPeerUnresponsive,
                              static_cast<uint32_t>(rank_.pid()),
                              v->host.empty() ? log::hostName() : v->host, v->detail};
    const std::string detail = "rank " + std::to_string(config_.rank) + ": " + net::describe(root) +
                               " in phase " + protocol::rankPhaseName(page_.currentPhase()) +
                               "; killed";
    return terminate(FaultReason::kUnresponsive, "liveness timeout", detail,
                     page_.iteration.load(std::memory_order_acquire), /*graceful=*/false);
  }
  if (!linkEndLogged_) {
    if (const std::optional<std::string> why = liveness_->ended()) {
      linkEndLogged_ = true;
      log_.write("liveness link with the rank ended (%s); its end is watched through %s",
                 why->c_str(), rank_.usesPidfd() ? "its pidfd" : "its pid");
    }
  }
  return -1;
}

int Monitor::terminate(FaultReason reason, const char* what, const std::string& detail,
                       int iteration, bool graceful) {
  log_.write("%s in iteration %d: %s", what, iteration, detail.c_str());
  killReason_ = reason;
  killWhat_ = what;
  // Recorded before the kill, so that the survivors learn why; a store that
  // fails now does not save a hung rank (the death path retries).
  try {
    if (publisher_.markTerminated(config_.rank, reason)) {
      protocol::FaultRecord r = record(reason, config_.rank, detail);
      r.iteration = iteration;
      publisher_.publish(r);
    }
    if (!spare()) {
      publisher_.markInterrupted(iteration, reason);
    }
  } catch (const store::StoreError& e) {
    log_.write("could not record the %s before the kill: %s", what, e.what());
  }
  bool ended = false;
  if (graceful) {
    rank_.signal(SIGCONT);
    rank_.signal(SIGTERM);
    ended = rank_.waitForEnd(config_.grace);
    if (!ended) {
      log_.write("pid %d still there %lld ms after SIGTERM: SIGKILL", static_cast<int>(rank_.pid()),
                 static_cast<long long>(config_.grace.count()));
    }
  }
  if (!ended) {
    rank_.signal(SIGKILL);
    if (!rank_.waitForEnd(std::max(config_.grace, Millis(1000)))) {
      log_.write("pid %d survives SIGKILL (uninterruptible?); recording it as terminated",
                 static_cast<int>(rank_.pid()));
    }
  }
  return onRankEnded(RankEnd::kKilledByMonitor);
}

void Monitor::checkSibling(uint64_t nowNs) {
  // Once the rank waits in the completion barrier, others may finish (and
  // remove their heartbeats) at any moment: no sibling checks from then on.
  if (page_.currentPhase() >= RankPhase::kCompleting) {
    return;
  }
  const std::vector<int> missing = sibling_.check(nowNs);
  if (missing.empty() || page_.currentPhase() >= RankPhase::kCompleting) {
    return;
  }
  const int iteration = page_.iteration.load(std::memory_order_acquire);
  for (const int s : missing) {
    if (!publisher_.markTerminated(s, FaultReason::kUnresponsive)) {
      continue;  // someone else recorded it first
    }
    const std::string detail = "heartbeat of rank " + std::to_string(s) + " missing (timeout " +
                               std::to_string(config_.heartbeatTimeout.count()) +
                               " ms): rank and monitor gone";
    protocol::FaultRecord r = record(FaultReason::kUnresponsive, s, detail);
    r.iteration = iteration;
    const int64_t index = publisher_.publish(r);
    publisher_.countAtIterationBarrier(s, iteration, barrierSlots());
    if (store_.exists(keys_.spare(iteration, s), callTimeoutFor(config_))) {
      log_.write("rank %d (a spare in iteration %d) unresponsive: left the pool (fault %lld)", s,
                 iteration, static_cast<long long>(index));
      continue;
    }
    publisher_.markInterrupted(iteration, FaultReason::kUnresponsive);
    log_.write("rank %d unresponsive in iteration %d: %s (fault %lld)", s, iteration,
               detail.c_str(), static_cast<long long>(index));
  }
}

// The order of the writes is the protocol: terminated/<r> (the claim), the
// fault record, the barrier count, and iteration/<k>/interrupted last, so a
// rank woken by interrupted finds everything else in place.
int Monitor::onRankEnded(RankEnd end) {
  // The culprits compare this with the abort times of the ranks
  // (restart/loop/job/culprits.h): the record may be published much later.
  const uint64_t seenWallNs = wallClockNs();
  // All the records together within the store's timeout: a store that stays
  // away does not keep the monitor once its rank is gone.
  const uint64_t deadline = monotonicNs() + toNs(config_.storeTimeout);
  const bool killedByMonitor = end == RankEnd::kKilledByMonitor;
  const RankPhase phase = page_.currentPhase();
  const int iteration = page_.iteration.load(std::memory_order_acquire);
  if (phase == RankPhase::kWithdrawn) {
    return quietExit();
  }
  if (!killedByMonitor && phase == RankPhase::kDone) {
    return cleanExit("its rank is done");
  }
  if (!killedByMonitor && phase == RankPhase::kFailed && leftWithItsOwnRecord(deadline)) {
    return cleanExit("its rank left the loop with an error and ended");
  }
  if (phase == RankPhase::kJoining) {
    // Not in the job's World yet: recorded terminated, so that an admission
    // that counted it has the barriers count it too; nobody is interrupted.
    log_.write("rank %d ended while joining the job (%s)", config_.rank,
               killedByMonitor ? killWhat_.c_str() : "its process ended");
    try {
      retrying("recording the end of the joiner", deadline,
               [&] { publisher_.markTerminated(config_.rank, FaultReason::kTerminated); });
    } catch (const store::StoreError&) {
      // retrying logged it
    }
    return cleanExit("its rank ended while joining");
  }
  // A rank that left the loop without its own terminated mark (the store did
  // not answer it: Loop::run, StoreUnavailable) is recorded as any end: the
  // others would otherwise wait for it until its heartbeat is missed.
  const std::string detail =
      "process " + std::to_string(rank_.pid()) + " ended in phase " +
      protocol::rankPhaseName(phase) +
      (phase == RankPhase::kFailed && !killedByMonitor
           ? std::string(" (it left the loop with an error and no record of its own)")
           : std::string()) +
      (killedByMonitor ? ", killed by its monitor after the " + killWhat_ : std::string()) +
      (end == RankEnd::kExiting ? " (seen on its way out: every thread exiting or killed, the "
                                  "kernel still tearing it down)"
                                : std::string());
  log_.write("rank %d ended in iteration %d: %s", config_.rank, iteration, detail.c_str());
  const uint64_t seenNs = monotonicNs();
  try {
    // A store that restarts while these are written keeps some and loses
    // the others (the 5 ms drill, seed 23: the barrier count reached the new
    // instance, the mark went with the old one, and the others' restart kept
    // the dead rank in its World): written again on the instance that came
    // meanwhile, up to three times. The record goes with a mark this call
    // set: one already there had its record written after it.
    for (int attempt = 1;; ++attempt) {
      const uint64_t restartsBefore = storeRestartsSeen();
      recordEnd(iteration, phase, detail, seenWallNs, deadline);
      if (storeRestartsSeen() == restartsBefore || attempt == 3) {
        break;
      }
      log_.write("the store restarted while the end of rank %d was recorded: recorded again",
                 config_.rank);
    }
    if (spare()) {
      // A spare only leaves the pool: the barriers count it (terminated),
      // the active ranks go on.
      log_.write(
          "recorded in %lld us: terminated, counted at its barrier; a spare in iteration "
          "%d: the active ranks are not interrupted",
          static_cast<long long>((monotonicNs() - seenNs) / 1000), iteration);
    } else {
      log_.write(
          "recorded in %lld us: terminated, counted at its barrier, iteration %d interrupted",
          static_cast<long long>((monotonicNs() - seenNs) / 1000), iteration);
    }
    try {
      heartbeat_.remove();
    } catch (const store::StoreError& e) {
      log_.write("could not remove the heartbeat: %s", e.what());
    }
  } catch (const store::StoreError& e) {
    log_.write("the death of rank %d could not be recorded: %s", config_.rank, e.what());
  }
  // The dump comes after the records: the survivors wait for those.
  const std::string blackboxDir = config_.blackboxDir;
  const std::string path = postMortemPath(config_.logFile, blackboxDir, config_.rank, rank_.pid());
  try {
    PostMortem pm;
    pm.rank = config_.rank;
    pm.pid = rank_.pid();
    pm.iteration = iteration;
    pm.phase = protocol::rankPhaseName(phase);
    pm.reason = protocol::faultReasonName(killedByMonitor ? killReason_ : FaultReason::kTerminated);
    pm.detail = detail;
    const std::string summary = writePostMortem(pm, blackboxDir, path);
    log_.write("post-mortem dump %s (%s)", path.c_str(), summary.c_str());
  } catch (const std::exception& e) {
    log_.write("no post-mortem dump: %s", e.what());
  }
  keepTheMark(seenNs + toNs(config_.heartbeatTimeout));
  return kMonitorExitOk;
}

void Monitor::recordEnd(int iteration, RankPhase phase, const std::string& detail,
                        uint64_t seenWallNs, uint64_t deadline) {
  bool first = false;
  retrying("recording the termination", deadline,
           [&] { first = publisher_.markTerminated(config_.rank, FaultReason::kTerminated); });
  if (first) {
    protocol::FaultRecord r = record(FaultReason::kTerminated, config_.rank, detail);
    r.iteration = iteration;
    r.detectedNs = seenWallNs;
    int64_t index = 0;
    retrying("publishing the fault record", deadline, [&] { index = publisher_.publish(r); });
    log_.write("fault %lld: %s", static_cast<long long>(index), r.describe().c_str());
  }
  retrying("counting the rank at the iteration barrier", deadline,
           [&] { publisher_.countAtIterationBarrier(config_.rank, iteration, barrierSlots()); });
  if (phase == RankPhase::kCompleting && !spare()) {
    // Its function had returned: its part of the iteration is done, and the
    // others' completion barrier counts it through this arrival only
    // (restart/loop/loop.cc, completeTogether).
    retrying("counting the rank at the completion barrier", deadline,
             [&] { publisher_.countAtCompletionBarrier(config_.rank, iteration, barrierSlots()); });
  }
  if (!spare()) {
    retrying("marking the iteration interrupted", deadline,
             [&] { publisher_.markInterrupted(iteration, FaultReason::kTerminated); });
  }
}

void Monitor::keepTheMark(uint64_t until) {
  // A store restarted right after the death (the agent drill: killed 5 ms
  // after a SIGKILL) lost the mark with its old instance, unless a survivor
  // had read it (they put back the marks they read: restart/loop/
  // store_restarts.h). The others' barriers count a terminated rank on its
  // behalf and their restart leaves it out; without the mark they waited
  // for it until its heartbeat was missed (heartbeatTimeout), then took live
  // ranks that had waited as culprits. So until then the monitor looks, and
  // marks the rank again on an instance that lacks the mark. Only the mark:
  // the barrier arrivals and the interruption belong to an iteration the
  // job may have left, and a restarted barrier would count them anew.
  const std::vector<std::string> keys = {keys_.terminated(config_.rank), keys_.finished()};
  const Millis pause = std::min(config_.interval, Millis(50));
  while (monotonicNs() < until) {
    try {
      const std::vector<std::optional<std::string>> values = store_.multiGet(keys, callTimeout_);
      if (values[1].has_value()) {
        return;  // the job finished
      }
      if (!values[0].has_value() &&
          publisher_.markTerminated(config_.rank, FaultReason::kTerminated)) {
        log_.write("the store lost the terminated mark of rank %d (restarted): marked again",
                   config_.rank);
      }
    } catch (const store::StoreError&) {
      // Away: looked at again on its return.
    }
    std::this_thread::sleep_for(pause);
  }
}

bool Monitor::leftWithItsOwnRecord(uint64_t deadline) {
  // Loop::leave marks its rank terminated unless the store did not answer;
  // a store that does not answer by the deadline is taken as no record.
  bool marked = false;
  try {
    retrying("reading the rank's terminated mark", deadline,
             [&] { marked = publisher_.isTerminated(config_.rank); });
  } catch (const store::StoreError&) {
    return false;
  }
  return marked;
}

int Monitor::cleanExit(const char* why) {
  try {
    heartbeat_.remove();
  } catch (const store::StoreError& e) {
    log_.write("could not remove the heartbeat: %s", e.what());
  }
  log_.write("exiting: %s", why);
  return kMonitorExitOk;
}

int Monitor::quietExit() {
  // Its initial rank is another process's (restart/loop/job/joiners.h): the
  // heartbeat, the terminated mark and the barriers are that process's.
  log_.write(
      "exiting: its rank withdrew from the job (its initial rank is another process's); "
      "nothing recorded");
  return kMonitorExitOk;
}

int Monitor::fail(const std::string& why) {
  log_.write("the monitor failed and exits; its rank is left alone: %s", why.c_str());
  try {
    publisher_.publish(record(FaultReason::kMonitorProcess, config_.rank, why));
  } catch (const std::exception& e) {
    log_.write("could not publish the monitor's failure: %s", e.what());
  }
  return kMonitorExitFailed;
}

}  // namespace resilient::restart::monitor
