// The ranks' side of a local launch (launcher.h: planLocalLaunch): the
// variables the launcher put in a rank's environment, the out-of-band
// rendezvous (rank 0 serves it on the socket it inherited, every rank joins
// it) and the start signal rank 0 writes to the launcher. RANK, WORLD_SIZE
// and MASTER_PORT are each tool's to read and check.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "common/status.h"
#include "hostengine/rendezvous.h"
#include "tools/harness/launcher.h"

namespace resilient::harness {

// What planLocalLaunch set for a rank, read back. Set by hand (a rank
// started by a job launcher), only MASTER_ADDR may be there.
struct LaunchedRank {
  std::string master;  // MASTER_ADDR, 127.0.0.1 when unset
  uint64_t token = 0;  // names.token (hexadecimal), 0 when unset
  // Started by the launcher (names.token set): the rendezvous socket was
  // open before any rank started.
  hostengine::ServerSocket serverSocket = hostengine::ServerSocket::kMayNotListenYet;
  std::optional<int> listenFd;  // rank 0: names.listenFd, the rendezvous socket it inherited
  std::optional<int> startFd;   // rank 0: names.startFd, the start pipe's write end
};
LaunchedRank readLaunchedRank(const Environment& env, const LaunchEnvNames& names);

// One rank's place in the out-of-band rendezvous of MASTER_ADDR:MASTER_PORT.
struct RendezvousPlace {
  std::string master;
  uint16_t port = 0;
  int rank = 0;
  int world = 0;
  uint64_t token = 0;
  int64_t timeoutMs = 30000;  // joining: how long to retry while the server is not up
  hostengine::ServerSocket serverSocket =
      hostengine::ServerSocket::kMayNotListenYet;  // LaunchedRank's
  // Rank 0's serving socket: the one it inherited, if any; without one,
  // listen on master:port itself when `listenWhenNotInherited` (a rank 0
  // started by hand), else fail.
  std::optional<int> inheritedListenFd;
  bool listenWhenNotInherited = false;
};

// Rank 0: the rendezvous server for `place.world` ranks.
Result<std::unique_ptr<hostengine::RendezvousServer>> serveRendezvous(const RendezvousPlace& place);
// Every rank, rank 0 included: the client connected to master:port.
Result<std::unique_ptr<hostengine::RendezvousClient>> joinRendezvous(const RendezvousPlace& place);

// Rank 0, when the measured phase starts: writes `startNs` (its
// CLOCK_MONOTONIC time, 8 bytes) to the launcher's start pipe and closes it.
void signalStart(int startFd, uint64_t startNs);

}  // namespace resilient::harness
