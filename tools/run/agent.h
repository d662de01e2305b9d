// The per-node agent of resilient-run: starts its node's ranks, and when one
// of their processes ends abnormally starts a new process in its place, which
// joins the running job as a spare (NCCL_RESILIENT_RESTART_JOIN=1; the job's
// next restart brings it in, restart/loop/job/joiners.h). The others are never
// touched. Limits per local rank and per node stop a crash loop: past them
// the agent stops replacing and reports the node left out (its ranks' places
// go to spares elsewhere). docs/restart.md, "The agent".
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "store/store.h"

namespace resilient::run {

struct AgentConfig {
  int nprocPerNode = 1;
  int nnodes = 1;
  int nodeRank = 0;
  std::string storeUrl;  // every rank's NCCL_RESILIENT_STORE_URL (the node's proxy by default)
  std::string jobId;     // NCCL_RESILIENT_RESTART_JOB
  int maxRestarts = 3;   // new processes per local rank
  int nodeMaxRestarts = -1;  // new processes for the whole node (-1: 4 per local rank)
  std::string logDir;    // rank<r>.<n>.log per process (empty: the agent's own output)
  // NAME=VALUE set for each process, "{rank}" and "{local_rank}" in VALUE
  // replaced by its own (--rank-env).
  std::vector<std::string> rankEnv;
  std::vector<std::string> command;  // the program and its arguments
};

// How one process of a local rank ended (for the report and the exit status).
struct ProcessEnd {
  int localRank = 0;
  pid_t pid = 0;
  int status = 0;  // waitpid's
  bool replaced = false;
};

class HostedStore;

class Agent {
 public:
  // `hosted`: the job's store this agent serves (node 0 with --host-store;
  // null otherwise), restarted when it ends while the job runs.
  Agent(AgentConfig config, std::shared_ptr<store::Store> store, HostedStore* hosted = nullptr);

  // Starts the node's ranks and supervises them until each local rank's last
  // process has ended. Returns the agent's exit status: 0 when every local
  // rank's last process exited 0, 1 otherwise; 128+signal when stopped by
  // SIGINT/SIGTERM (forwarded to the ranks).
  int run();

  // Every process end so far, in order.
  const std::vector<ProcessEnd>& ends() const noexcept { return ends_; }

 private:
  struct Slot {
    pid_t pid = 0;
    int processes = 0;  // started for this local rank (1 + replacements)
    int withdrawals = 0;  // of those, started after a joiner withdrew (not counted)
    int lastStatus = 0;
    bool running = false;
  };

  pid_t start(int localRank, bool replacement);
  // What to do about local rank `localRank` whose process ended with `status`.
  void onEnd(int localRank, int status);
  bool jobFinished();
  // The store this agent serves ended: serves it again (reaps it if so).
  void serveStoreIfEnded();
  void report(const std::string& what);
  // Once the node's ranks have ended: says so in the store, and the agent
  // that serves the store waits for every other agent to say so (bounded).
  void leave();

  AgentConfig config_;
  std::shared_ptr<store::Store> store_;
  HostedStore* hosted_;
  std::vector<Slot> slots_;
  std::map<pid_t, int> localRankOf_;
  std::vector<ProcessEnd> ends_;
  int replacements_ = 0;
  bool leftOut_ = false;
};

}  // namespace resilient::run
