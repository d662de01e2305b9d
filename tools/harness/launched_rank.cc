#include "tools/harness/launched_rank.h"

#include <unistd.h>

#include <cstdlib>

#include "common/file_descriptor.h"
#include "common/net/socket.h"
#include "common/net/socket_address.h"

namespace resilient::harness {

LaunchedRank readLaunchedRank(const Environment& env, const LaunchEnvNames& names) {
  LaunchedRank launched;
  launched.master = env.get("MASTER_ADDR", "127.0.0.1");
  if (std::optional<std::string> token = env.get(names.token)) {
    launched.token = std::strtoull(token->c_str(), nullptr, 16);
    launched.serverSocket = hostengine::ServerSocket::kOpenedByLauncher;
  }
  if (std::optional<std::string> fd = env.get(names.listenFd)) {
    launched.listenFd = std::atoi(fd->c_str());
  }
  if (std::optional<std::string> fd = env.get(names.startFd)) {
    launched.startFd = std::atoi(fd->c_str());
  }
  return launched;
}

Result<std::unique_ptr<hostengine::RendezvousServer>> serveRendezvous(
    const RendezvousPlace& place) {
  Result<FileDescriptor> listenFd = invalidUsage("no rendezvous socket");
  if (place.inheritedListenFd) {
    listenFd = FileDescriptor(*place.inheritedListenFd);
  } else if (place.listenWhenNotInherited) {
    listenFd = listenOn(place.master, place.port, {.backlog = 1024, .reuseAddress = true});
  }
  if (!listenFd.ok()) {
    return listenFd.status();
  }
  return hostengine::RendezvousServer::start(std::move(listenFd).value(),
                                             static_cast<uint32_t>(place.world), place.token);
}

Result<std::unique_ptr<hostengine::RendezvousClient>> joinRendezvous(const RendezvousPlace& place) {
  Result<SocketAddress> server = resolveAddress(place.master, place.port);
  if (!server.ok()) {
    return server.status();
  }
  return hostengine::RendezvousClient::connect(*server,
                                               {.rank = static_cast<uint32_t>(place.rank),
                                                .worldSize = static_cast<uint32_t>(place.world),
                                                .token = place.token,
                                                .timeoutMs = place.timeoutMs,
                                                .serverSocket = place.serverSocket});
}

void signalStart(int startFd, uint64_t startNs) {
  (void)!::write(startFd, &startNs, sizeof startNs);
  ::close(startFd);
}

}  // namespace resilient::harness
