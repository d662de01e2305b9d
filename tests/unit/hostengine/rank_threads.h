// Ranks as threads of one test process: each runs the host engine over a
// transport the test chooses, meeting the others through a real rendezvous
// server on loopback.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "common/status.h"
#include "hostengine/engine.h"
#include "hostengine/rendezvous.h"
#include "plugin/transport/transport.h"

namespace resilient::test {

inline constexpr uint64_t kToken = 77;  // the rendezvous token of these jobs

struct RankRun {
  std::optional<hostengine::Fault> setupFault;
  std::vector<hostengine::IterationResult> results;
  int pieces = 0;
};

// The ranks of one job as threads: body(rank, oob, ok) runs on n threads
// whose out-of-band channels meet at a real rendezvous server on loopback;
// a rank whose channel cannot connect gets body(rank, nullptr, why).
using RankBody =
    std::function<void(int rank, hostengine::RendezvousClient* oob, const Status& joined)>;
void runRankThreads(int n, const RankBody& body);

// Runs `sizes` (two iterations each) on n ranks, each with the transport
// transportFor(rank); a rank stops at its first fault.
std::vector<RankRun> runRanks(int n, hostengine::Pattern pattern, const std::vector<size_t>& sizes,
                              const std::function<transport::Transport&(int)>& transportFor,
                              hostengine::EngineOptions base = {});

// FAILs on any setup or operation fault; CHECKs that no element was wrong.
void requireClean(const std::vector<RankRun>& runs);

}  // namespace resilient::test
