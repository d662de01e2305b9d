// resilient-run: the per-node agent (docs/restart.md, "The agent"). One per
// node, with torchrun's habits:
//
//   resilient-run --nproc-per-node 4 --nnodes 2 --node-rank 0
//       --store tcp://node0:29400 --host-store train.py --epochs 3
//
// starts the node's ranks (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
// GROUP_RANK; NCCL_RESILIENT_STORE_URL, NCCL_RESILIENT_RESTART_JOB), replaces a
// process that ends abnormally with a new one that joins the running job as a
// spare, and never touches the others. Under SLURM (`srun --ntasks-per-node=1
// resilient-run ...`) the node count, node rank and job id come from
// SLURM_NNODES, SLURM_NODEID and SLURM_JOB_ID. --host-store: this agent serves
// the job's TCP store (node rank 0; a rank's death never takes the store with
// it). A program ending in ".py" runs under python3 ($PYTHON), as torchrun runs
// it; --no-python runs it as given.
//
// The agent speaks to the job's store for its node: its ranks and their
// monitors reach it through the node's proxy (store/proxy/node_proxy.h) on
// loopback, which sends their barrier arrivals up as one arrival per node and
// their heartbeats in batches; --no-node-proxy points them at the store itself.
//
// Exit status: 0 every local rank's last process exited 0; 1 otherwise; 2
// usage; 128+N stopped by signal N (forwarded to the ranks).
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "common/net/socket_address.h"
#include "store/client_options.h"
#include "store/errors.h"
#include "store/lazy_store.h"
#include "store/proxy/node_proxy.h"
#include "tools/run/agent.h"
#include "tools/run/hosted_store.h"

namespace {

using namespace resilient;

int envInt(const char* name, int fallback) {
  const char* v = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): before any thread
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

std::string envString(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): before any thread
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"resilient-run: the per-node agent of a resilient job (docs/restart.md)"};
  run::AgentConfig config;
  config.nnodes = envInt("SLURM_NNODES", 1);
  config.nodeRank = envInt("SLURM_NODEID", 0);
  config.jobId = envString("SLURM_JOB_ID", "");
  bool hostStore = false;
  bool noPython = false;
  bool noNodeProxy = false;
  app.add_option("--nproc-per-node", config.nprocPerNode, "ranks on this node")
      ->check(CLI::PositiveNumber);
  app.add_option("--nnodes", config.nnodes, "nodes in the job (default: SLURM_NNODES, or 1)")
      ->check(CLI::PositiveNumber);
  app.add_option("--node-rank", config.nodeRank, "this node's rank (default: SLURM_NODEID, or 0)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--store", config.storeUrl,
                 "the job's store, tcp://HOST:PORT or etcd://... (default with one node: one "
                 "this agent serves on loopback)");
  app.add_flag("--host-store", hostStore, "serve the job's TCP store from this agent (node rank 0)");
  app.add_option("--job", config.jobId, "the job's id in the store (default: SLURM_JOB_ID, or \"job\")");
  app.add_option("--max-restarts", config.maxRestarts, "new processes per local rank")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--node-max-restarts", config.nodeMaxRestarts,
                 "new processes for the whole node before it is left out (default: 4 per local "
                 "rank)");
  app.add_option("--log-dir", config.logDir,
                 "one log per process, rank<R>.<N>.log (default: this agent's output)");
  app.add_option("--rank-env", config.rankEnv,
                 "NAME=VALUE for each process, {rank} and {local_rank} in VALUE replaced by its "
                 "own (repeatable)");
  app.add_flag("--no-python", noPython, "run the program as given, even if it ends in .py");
  app.add_flag("--no-node-proxy", noNodeProxy,
               "the ranks talk to the job's store themselves (default: through this agent, one "
               "client per node)");
  std::vector<std::string> command;
  // "resilient-run [options] -- program ...", or the program as the first
  // argument that is not an option: everything after it is the program's.
  int optionArgs = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--") {
      optionArgs = i;
      command.assign(argv + i + 1, argv + argc);
      break;
    }
  }
  if (optionArgs == argc) {
    app.add_option("command", command, "the program and its arguments");
    app.prefix_command();
  }
  try {
    app.parse(optionArgs, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (config.jobId.empty()) {
    config.jobId = "job";
  }
  const std::vector<std::string> rest = app.remaining();
  command.insert(command.end(), rest.begin(), rest.end());
  if (command.empty()) {
    std::fprintf(stderr, "resilient-run: no program to run\n");
    return 2;
  }
  if (!noPython && command.front().size() > 3 &&
      command.front().compare(command.front().size() - 3, 3, ".py") == 0) {
    command.insert(command.begin(), envString("PYTHON", "python3"));
  }
  config.command = command;
  try {
    std::unique_ptr<run::HostedStore> hosted;
    if (config.storeUrl.empty()) {
      if (config.nnodes != 1) {
        std::fprintf(stderr, "resilient-run: --store is needed with %d nodes\n", config.nnodes);
        return 2;
      }
      hostStore = true;
      config.storeUrl = "tcp://127.0.0.1:0";
    }
    store::ClientOptions clientOptions = store::ClientOptions::fromParams();
    clientOptions.followRestarts = true;  // the store this agent (or node 0's) restarts
    if (hostStore) {
      if (config.storeUrl.rfind("tcp://", 0) != 0) {
        std::fprintf(stderr, "resilient-run: --host-store needs a tcp:// store, not %s\n",
                     config.storeUrl.c_str());
        return 2;
      }
      // The store in a process of its own, which this agent restarts: a
      // rank's death never takes it along, and its own is survived.
      const std::string where = config.storeUrl.substr(6, config.storeUrl.find('/', 6) - 6);
      const HostPort hp = store::valueOrThrow(parseHostPort(where, "0.0.0.0"));
      hosted = std::make_unique<run::HostedStore>(
          formatHostPort(hp.host, hp.port), config.logDir.empty() ? "" : config.logDir + "/store.log");
      hosted->start();
      config.storeUrl = hosted->url();
      std::fprintf(stderr, "resilient-run: serving the job's store on %s (pid %d)\n",
                   config.storeUrl.c_str(), static_cast<int>(hosted->pid()));
    }
    const std::string jobStoreUrl = config.storeUrl;
    std::unique_ptr<store::proxy::NodeProxy> proxy;
    if (!noNodeProxy) {
      // The proxy's own client of the job's store, opened by its first call.
      // A restarted store (the hosted one, started again) is a restart for
      // the node's clients too, so that they put their state back.
      auto restarted = std::make_shared<std::atomic<store::proxy::NodeProxy*>>(nullptr);
      store::ClientOptions upstreamOptions = clientOptions;
      upstreamOptions.name = store::defaultClientName() + " (node " +
                             std::to_string(config.nodeRank) + " proxy)";
      upstreamOptions.onServerRestart = [restarted] {
        if (store::proxy::NodeProxy* p = restarted->load()) {
          p->upstreamRestarted();
        }
      };
      store::proxy::NodeProxyOptions po;
      po.token = clientOptions.token;
      proxy = std::make_unique<store::proxy::NodeProxy>(
          std::make_shared<store::LazyStore>(jobStoreUrl, upstreamOptions), po);
      restarted->store(proxy.get());
      config.storeUrl = proxy->url();
      std::fprintf(stderr, "resilient-run: node %d's ranks reach the job's store %s through %s\n",
                   config.nodeRank, jobStoreUrl.c_str(), config.storeUrl.c_str());
    }
    // Opened by its first call (the agent asks the store only when a rank
    // ended): a store that is slow to answer does not keep the ranks waiting.
    run::Agent agent(config, std::make_shared<store::LazyStore>(jobStoreUrl, clientOptions),
                     hosted.get());
    const int status = agent.run();
    return status;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "resilient-run: %s\n", e.what());
    return 1;
  }
}
