#include "tools/run/agent.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

#include "common/knobs.h"
#include "resilient/restart/errors.hpp"
#include "restart/protocol/job_keys.h"
#include "store/errors.h"
#include "tools/run/child_process.h"
#include "tools/run/hosted_store.h"

extern char** environ;  // NOLINT(readability-redundant-declaration): the agent's environment

namespace resilient::run {

namespace {

// Withdrawn joiners replaced per local rank without counting them: each
// needs a store restart racing a replacement's registration, so more is a
// loop, then counted as any end.
constexpr int kMaxWithdrawals = 8;

volatile sig_atomic_t gStopSignal = 0;

void onStopSignal(int sig) {
  gStopSignal = sig;
}

void log(const char* format, ...) __attribute__((format(printf, 1, 2)));
void log(const char* format, ...) {
  std::fprintf(stderr, "resilient-run: ");
  va_list args;
  va_start(args, format);
  std::vfprintf(stderr, format, args);
  va_end(args);
  std::fputc('\n', stderr);
}

}  // namespace

Agent::Agent(AgentConfig config, std::shared_ptr<store::Store> store, HostedStore* hosted)
    : config_(std::move(config)), store_(std::move(store)), hosted_(hosted) {
  if (config_.nprocPerNode < 1 || config_.nnodes < 1 || config_.nodeRank < 0 ||
      config_.nodeRank >= config_.nnodes) {
    throw std::invalid_argument("node rank " + std::to_string(config_.nodeRank) + " of " +
                                std::to_string(config_.nnodes) + " nodes with " +
                                std::to_string(config_.nprocPerNode) +
                                " processes each is not a job");
  }
  for (const std::string& entry : config_.rankEnv) {
    if (entry.find('=') == std::string::npos || entry.front() == '=') {
      throw std::invalid_argument("--rank-env wants NAME=VALUE, not \"" + entry + "\"");
    }
  }
  if (config_.command.empty()) {
    throw std::invalid_argument("no program to run");
  }
  if (config_.maxRestarts < 0) {
    throw std::invalid_argument("--max-restarts must be 0 or more");
  }
  if (config_.nodeMaxRestarts < 0) {
    config_.nodeMaxRestarts = 4 * config_.nprocPerNode;
  }
  slots_.resize(static_cast<size_t>(config_.nprocPerNode));
}

pid_t Agent::start(int localRank, bool replacement) {
  Slot& slot = slots_[static_cast<size_t>(localRank)];
  const int rank = config_.nodeRank * config_.nprocPerNode + localRank;
  // As torchrun sets them (a replacement keeps its predecessor's: the library
  // gives it a new place when it joins), plus the library's own.
  std::vector<std::pair<std::string, std::string>> vars = {
      {"RANK", std::to_string(rank)},
      {"LOCAL_RANK", std::to_string(localRank)},
      {"WORLD_SIZE", std::to_string(config_.nnodes * config_.nprocPerNode)},
      {"LOCAL_WORLD_SIZE", std::to_string(config_.nprocPerNode)},
      {"GROUP_RANK", std::to_string(config_.nodeRank)},
      {config::kStoreUrl.spec().name, config_.storeUrl},
      {config::kRestartJob.spec().name, config_.jobId},
      {config::kRestartExitForNewProcess.spec().name, "1"},
      {config::kRestartJoin.spec().name, replacement ? "1" : "0"},
      {"RESILIENT_RUN_PROCESS", std::to_string(slot.processes)},
  };
  for (const std::string& entry : config_.rankEnv) {
    std::string value = entry.substr(entry.find('=') + 1);
    for (const auto& [field, text] : {std::pair<std::string, std::string>{"{rank}", std::to_string(rank)},
                                      {"{local_rank}", std::to_string(localRank)}}) {
      for (size_t at = value.find(field); at != std::string::npos; at = value.find(field, at)) {
        value.replace(at, field.size(), text);
        at += text.size();
      }
    }
    vars.emplace_back(entry.substr(0, entry.find('=')), value);
  }
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    bool ours = false;
    for (const auto& [n, v] : vars) {
      ours = ours || n == name;
    }
    if (!ours) {
      env.push_back(entry);
    }
  }
  for (const auto& [n, v] : vars) {
    env.push_back(n + "=" + v);
  }
  Redirects redirects;
  if (!config_.logDir.empty()) {
    redirects.stdoutPath = config_.logDir + "/rank" + std::to_string(rank) + "." +
                           std::to_string(slot.processes) + ".log";
  }
  const pid_t pid = startChild(config_.command, &env, redirects);
  ++slot.processes;
  slot.pid = pid;
  slot.running = true;
  localRankOf_[pid] = localRank;
  log("rank %d (local %d): %s pid %d", rank, localRank,
      replacement ? "replacement process, joins the job as a spare:" : "started,",
      static_cast<int>(pid));
  return pid;
}

bool Agent::jobFinished() {
  // 2 s in all, in slices: the store this agent serves may be what fails
  // (killed as the rank died), and only this thread serves it again.
  std::string why;
  for (int slice = 0; slice < 10; ++slice) {
    try {
      return store_->get(restart::protocol::JobKeys(config_.jobId).finished(),
                         store::Millis(200))
          .has_value();
    } catch (const store::StoreError& e) {
      why = e.what();
      serveStoreIfEnded();
    }
  }
  log("cannot ask the store whether the job finished: %s", why.c_str());
  return false;
}

void Agent::serveStoreIfEnded() {
  int status = 0;
  if (hosted_ != nullptr && gStopSignal == 0 &&
      waitpid(hosted_->pid(), &status, WNOHANG) == hosted_->pid()) {
    hosted_->restart(status);
  }
}

void Agent::report(const std::string& what) {
  log("%s", what.c_str());
  try {
    store_->set(restart::protocol::JobKeys(config_.jobId).prefix() + "agents/" +
                    std::to_string(config_.nodeRank),
                what, store::Millis(2000));
  } catch (const store::StoreError& e) {
    log("cannot record it in the store: %s", e.what());
  }
}

void Agent::onEnd(int localRank, int status) {
  Slot& slot = slots_[static_cast<size_t>(localRank)];
  const int rank = config_.nodeRank * config_.nprocPerNode + localRank;
  slot.running = false;
  slot.lastStatus = status;
  ProcessEnd end{localRank, slot.pid, status, false};
  const bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  log("rank %d (local %d) pid %d ended: %s", rank, localRank, static_cast<int>(slot.pid),
      describeStatus(status).c_str());
  if (!clean && gStopSignal == 0) {
    if (leftOut_) {
      log("rank %d not replaced: the node is left out", rank);
    } else if (jobFinished()) {
      log("rank %d not replaced: the job has finished", rank);
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == restart::kExitWithdrew &&
               slot.withdrawals < kMaxWithdrawals) {
      // Not a failure: its joiner number was taken on a restarted store
      // (restart/loop/job/joiners.h); the next process draws its own.
      ++slot.withdrawals;
      start(localRank, /*replacement=*/true);
      end.replaced = true;
    } else if (slot.processes - slot.withdrawals > config_.maxRestarts) {
      log("rank %d not replaced: %d new processes already (--max-restarts %d); its place goes "
          "to a spare",
          rank, slot.processes - slot.withdrawals - 1, config_.maxRestarts);
    } else if (replacements_ >= config_.nodeMaxRestarts) {
      leftOut_ = true;
      report("node " + std::to_string(config_.nodeRank) + " left out: " +
             std::to_string(replacements_) + " processes replaced (--node-max-restarts " +
             std::to_string(config_.nodeMaxRestarts) + "); its ranks' places go to spares elsewhere");
    } else {
      ++replacements_;
      start(localRank, /*replacement=*/true);
      end.replaced = true;
    }
  }
  ends_.push_back(end);
}

void Agent::leave() {
  const restart::protocol::JobKeys keys(config_.jobId);
  const std::string prefix = keys.prefix() + "agents/done/";
  try {
    store_->set(prefix + std::to_string(config_.nodeRank), "1", store::Millis(5000));
    if (hosted_ == nullptr) {
      return;
    }
    // The other nodes' ranks may still use the store (their termination,
    // their monitors' last records): it is served until their agents are done.
    std::vector<std::string> others;
    for (int n = 0; n < config_.nnodes; ++n) {
      if (n != config_.nodeRank) {
        others.push_back(prefix + std::to_string(n));
      }
    }
    if (!others.empty()) {
      store_->wait(others);  // at most the store's call timeout (NCCL_RESILIENT_STORE_TIMEOUT_MS)
    }
  } catch (const store::StoreError& e) {
    log("the other nodes' agents did not say they are done (%s); stopping the store", e.what());
  }
}

int Agent::run() {
  // Orphans (the ranks' monitor processes once their rank is gone) are
  // reaped here, not left to init.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  struct sigaction sa {};
  sa.sa_handler = onStopSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  for (int l = 0; l < config_.nprocPerNode; ++l) {
    start(l, /*replacement=*/false);
  }
  bool forwarded = false;
  for (;;) {
    bool anyRunning = false;
    for (const Slot& s : slots_) {
      anyRunning = anyRunning || s.running;
    }
    if (!anyRunning) {
      break;
    }
    if (gStopSignal != 0 && !forwarded) {
      forwarded = true;
      log("signal %d: stopping the ranks", static_cast<int>(gStopSignal));
      for (const Slot& s : slots_) {
        if (s.running) {
          kill(s.pid, SIGTERM);
        }
      }
    }
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) {
        continue;
      }
      throw std::runtime_error(std::string("waitpid: ") + std::strerror(errno));
    }
    if (hosted_ != nullptr && pid == hosted_->pid()) {
      if (gStopSignal == 0) {
        hosted_->restart(status);
      }
      continue;
    }
    const auto it = localRankOf_.find(pid);
    if (it == localRankOf_.end()) {
      continue;  // a monitor process handed over to this subreaper
    }
    const int localRank = it->second;
    localRankOf_.erase(it);
    // A store that ended too is served again first: deciding on the rank asks
    // it whether the job finished, which waited out its timeout (2 s) on the
    // dead store before the store was restarted (the agent drill with the
    // store killed 5 ms after a SIGKILL: the ranks' restart failed its calls).
    serveStoreIfEnded();
    onEnd(localRank, status);
  }
  // The ranks' monitors that are left end once they have recorded their rank.
  while (waitpid(-1, nullptr, WNOHANG) > 0) {
  }
  if (gStopSignal == 0) {
    leave();
  }
  if (gStopSignal != 0) {
    return 128 + static_cast<int>(gStopSignal);
  }
  int failed = 0;
  for (size_t l = 0; l < slots_.size(); ++l) {
    const int status = slots_[l].lastStatus;
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      ++failed;
    }
  }
  log("node %d done: %d local ranks, %d failed, %d processes replaced", config_.nodeRank,
      config_.nprocPerNode, failed, replacements_);
  return failed == 0 ? 0 : 1;
}

}  // namespace resilient::run
