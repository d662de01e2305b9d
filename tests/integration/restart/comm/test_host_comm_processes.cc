// HostCommunicator across processes: four ranks (this program re-executed
// with --rank) share the embedded TCP store served by the parent, build a
// host communicator through the real libnccl-net-resilient.so on loopback
// and run exact all-reduces until the parent SIGKILLs rank 3. The survivors
// must each report a HostCommunicatorError within the bound, and the rank
// that receives from rank 3 must name it as the peer. Exit 0 on success.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "resilient/restart/host_communicator.hpp"
#include "restart/comm/store_rendezvous.h"
#include "store/open_store.h"
#include "store/prefix_view.h"
#include "store/tcp/server.h"

#ifndef RESILIENT_PLUGIN_PATH
#error "RESILIENT_PLUGIN_PATH must name libnccl-net-resilient.so"
#endif

using namespace resilient;
using namespace resilient::restart;
using std::chrono::milliseconds;

namespace {

constexpr int kWorld = 4;
constexpr int kVictim = 3;
constexpr uint64_t kDetectBoundNs = 5000000000ull;  // the plugin's liveness timeout is 1.5 s

int runRank(int rank, const std::string& url) {
  auto store = store::openStore(url, store::ClientOptions{});
  auto view = std::make_shared<store::PrefixView>(store, "iter/0/");
  comm::StoreRendezvous rendezvous(view, rank, kWorld);
  State state;
  state.rank = state.activeRank = rank;
  state.worldSize = state.activeWorldSize = kWorld;
  state.mode = Mode::kActive;
  HostCommunicatorOptions options;
  options.plugin = RESILIENT_PLUGIN_PATH;
  auto comm = HostCommunicator::create(
      CommunicatorSetup{state, rendezvous, "procs", nullptr, {}, false, milliseconds(20000), {}, {},
                        {}},
      options);
  std::vector<float> data(1 << 16);
  for (uint64_t step = 0;; ++step) {
    for (size_t i = 0; i < data.size(); ++i) {
      data[i] = static_cast<float>((i + step + static_cast<size_t>(rank)) % 7);
    }
    try {
      comm->allReduce(data.data(), data.data(), data.size());
    } catch (const HostCommunicatorError& e) {
      store->set("fault/" + std::to_string(rank),
                 std::to_string(e.peer()) + " " + std::to_string(monotonicNs()) + " " + e.what());
      return 0;
    }
    for (size_t i = 0; i < data.size(); ++i) {
      float want = 0;
      for (int r = 0; r < kWorld; ++r) {
        want += static_cast<float>((i + step + static_cast<size_t>(r)) % 7);
      }
      if (data[i] != want) {
        std::fprintf(stderr, "rank %d: step %llu element %zu: %g, expected %g\n", rank,
                     static_cast<unsigned long long>(step), i, data[i], want);
        return 1;
      }
    }
    if (step == 3) {
      store->set("up/" + std::to_string(rank), "1");
    }
  }
}

int runParent(const char* self) {
  store::tcp::ServerOptions so;
  so.host = "127.0.0.1";
  store::tcp::StoreServer server(so);
  const std::string url = "tcp://127.0.0.1:" + std::to_string(server.port());
  std::vector<pid_t> pids;
  for (int r = 0; r < kWorld; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      const std::string rank = std::to_string(r);
      execl(self, self, "--rank", rank.c_str(), url.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    pids.push_back(pid);
  }
  auto store = store::openStore(url, store::ClientOptions{});
  std::vector<std::string> up;
  for (int r = 0; r < kWorld; ++r) {
    up.push_back("up/" + std::to_string(r));
  }
  int failures = 0;
  try {
    store->wait(up, store::Timeout(milliseconds(30000)));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FAIL: ranks did not come up: %s\n", e.what());
    for (pid_t p : pids) {
      kill(p, SIGKILL);
    }
    failures = 1;
  }
  const uint64_t killedAt = monotonicNs();
  kill(pids[kVictim], SIGKILL);
  for (int r = 0; r < kWorld; ++r) {
    int status = 0;
    waitpid(pids[static_cast<size_t>(r)], &status, 0);
    if (r == kVictim || failures != 0) {
      continue;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "FAIL: rank %d ended with status %d\n", r, status);
      ++failures;
      continue;
    }
    const auto fault = store->get("fault/" + std::to_string(r));
    if (!fault) {
      std::fprintf(stderr, "FAIL: rank %d reported no fault\n", r);
      ++failures;
      continue;
    }
    int peer = -2;
    unsigned long long at = 0;
    int used = 0;
    std::sscanf(fault->c_str(), "%d %llu %n", &peer, &at, &used);
    const double ms = static_cast<double>(at - killedAt) / 1e6;
    std::printf("rank %d: fault after %.1f ms, peer %d: %s\n", r, ms, peer, fault->c_str() + used);
    if (at < killedAt || at - killedAt > kDetectBoundNs) {
      std::fprintf(stderr, "FAIL: rank %d detected after %.1f ms\n", r, ms);
      ++failures;
    }
    // The rank that receives from the victim names it; the others see the
    // cascade (their neighbours leaving after their own fault) as well.
    if (r == (kVictim + 1) % kWorld && peer != kVictim) {
      std::fprintf(stderr, "FAIL: rank %d blamed rank %d, not %d\n", r, peer, kVictim);
      ++failures;
    }
  }
  std::printf("%s\n", failures == 0 ? "PASS" : "FAIL");
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 4 && std::string(argv[1]) == "--rank") {
      return runRank(std::atoi(argv[2]), argv[3]);
    }
    return runParent(argv[0]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FAIL: %s\n", e.what());
    return 1;
  }
}
