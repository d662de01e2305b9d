// Ranks as threads of one test process: each runs the host engine over a
// transport the test chooses, meeting the others through a real rendezvous
// server on loopback.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "hostengine/engine.h"
#include "plugin/transport/transport.h"

namespace resilient::test {

inline constexpr uint64_t kToken = 77;  // the rendezvous token of these jobs

struct RankRun {
  std::optional<hostengine::Fault> setupFault;
  std::vector<hostengine::IterationResult> results;
  int pieces = 0;
};

// Runs `sizes` (two iterations each) on n ranks, each with the transport
// transportFor(rank); a rank stops at its first fault.
std::vector<RankRun> runRanks(int n, hostengine::Pattern pattern, const std::vector<size_t>& sizes,
                              const std::function<transport::Transport&(int)>& transportFor,
                              hostengine::EngineOptions base = {});

// FAILs on any setup or operation fault; CHECKs that no element was wrong.
void requireClean(const std::vector<RankRun>& runs);

}  // namespace resilient::test
