// Out-of-band rendezvous of the host engine's ranks: rank 0 serves a tiny TCP
// rendezvous (MASTER_ADDR:MASTER_PORT); every rank connects once and then
// takes part in rounds of all-gather (the listen handles, barriers, result
// rows). It plays the part NCCL's bootstrap plays for the net plugin.
//
// Wire format: every frame is a 32-byte header, little endian,
//   u32 magic "RNDV", u16 version, u16 type, u64 job token,
//   u32 rank, u32 world size, u32 round, u32 payload length,
// followed by the payload. A client sends HELLO (no payload) first, then one
// GATHER per round (its contribution), then BYE. The server answers each
// round with REPLY (for every rank: u32 length + bytes, in rank order), or
// with ABORT (payload: the reason) once any rank aborted or vanished before
// its BYE. A wrong magic, version, token, world size, rank, type, round or
// length gets the connection refused and closed, never trusted; it does not
// disturb the ranks that are registered.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/file_descriptor.h"
#include "common/net/event_loop.h"
#include "common/net/socket_address.h"
#include "common/status.h"

namespace resilient::hostengine {

inline constexpr uint32_t kRendezvousMagic = 0x56444e52;  // "RNDV" in memory order
inline constexpr uint16_t kRendezvousVersion = 1;
inline constexpr size_t kRendezvousHeaderBytes = 32;
inline constexpr uint32_t kRendezvousMaxWorld = 4096;
inline constexpr uint32_t kRendezvousMaxPayload = 1u << 20;  // one rank's contribution
inline constexpr uint32_t kRendezvousMaxReply = 64u << 20;   // a whole round
inline constexpr uint32_t kRendezvousMaxAbortText = 4096;

enum class RendezvousFrame : uint16_t {
  kHello = 1,
  kGather = 2,
  kReply = 3,
  kAbort = 4,
  kBye = 5,
};

struct RendezvousHeader {
  uint32_t magic = kRendezvousMagic;
  uint16_t version = kRendezvousVersion;
  RendezvousFrame type = RendezvousFrame::kHello;
  uint64_t token = 0;
  uint32_t rank = 0;
  uint32_t worldSize = 0;
  uint32_t round = 0;
  uint32_t length = 0;
};

void encodeRendezvousHeader(const RendezvousHeader& header, uint8_t* out) noexcept;
// Decodes and checks magic, version, type, rank < world size <= the limit,
// and the payload length limit of the frame type. invalidUsage on any fault.
Status decodeRendezvousHeader(const uint8_t* bytes, RendezvousHeader* out);

// The REPLY payload.
std::string encodeGathered(const std::vector<std::string>& parts);
Result<std::vector<std::string>> decodeGathered(std::string_view payload, uint32_t worldSize);

// What the engine needs from its out-of-band channel.
class OutOfBand {
 public:
  virtual ~OutOfBand() = default;
  // Everybody's `mine`, in rank order.
  virtual Result<std::vector<std::string>> allGather(std::string_view mine) = 0;
  virtual Status barrier() {
    Result<std::vector<std::string>> r = allGather({});
    return r.status();
  }
  // One round in which every rank gives `mine` and gets back only `peer`'s
  // (every rank of the round calls this, never allGather, for that round).
  // For a rank that connects to one peer (the ring's next): a channel that
  // can hand over one rank's contribution alone overrides it, so that a rank
  // reads one entry, not all of them. The default takes it from an allGather.
  virtual Result<std::string> exchangeWith(int peer, std::string_view mine) {
    Result<std::vector<std::string>> all = allGather(mine);
    if (!all.ok()) {
      return all.status();
    }
    if (peer < 0 || static_cast<size_t>(peer) >= all->size()) {
      return invalidUsage("exchange with rank " + std::to_string(peer) + " of " +
                          std::to_string(all->size()));
    }
    return std::move((*all)[static_cast<size_t>(peer)]);
  }
  // After an exchangeWith that ended, for a fault's blame: whether `rank`
  // gave its part of that round (it reached the exchange). Does not wait;
  // nullopt where the channel cannot tell (the default: an allGather either
  // had everybody's part or failed naming the missing ranks).
  virtual std::optional<bool> gaveInLastExchange(int /*rank*/) { return std::nullopt; }
  // The engine waits for its peers' connections (called now and then while
  // it does, from the setup's thread); an out-of-band channel may tell
  // whoever watches the process that it is waiting, not hung.
  virtual void waiting() noexcept {}
};

class RendezvousServer {
 public:
  // Serves `worldSize` ranks on `listenFd` (a listening socket it takes over)
  // in a thread of its own until every rank said BYE or left, or stop().
  static Result<std::unique_ptr<RendezvousServer>> start(FileDescriptor listenFd,
                                                         uint32_t worldSize, uint64_t token);
  ~RendezvousServer();
  RendezvousServer(const RendezvousServer&) = delete;
  RendezvousServer& operator=(const RendezvousServer&) = delete;

  uint16_t port() const noexcept { return port_; }
  // Connections refused for bad input so far.
  uint64_t refused() const noexcept { return refused_.load(std::memory_order_relaxed); }
  // Stops serving and joins the thread (also done by the destructor).
  void stop() noexcept;

 private:
  struct Client;
  struct Serving;
  RendezvousServer(FileDescriptor listenFd, uint32_t worldSize, uint64_t token);
  void serve() noexcept;

  FileDescriptor listen_;
  uint32_t worldSize_;
  uint64_t token_;
  uint16_t port_ = 0;
  EventLoop events_;  // the listener and the clients; stop() wakes it
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> refused_{0};
  std::thread thread_;
};

// Who joins the rendezvous, and how long its calls may wait.
// Whether the server's socket may not listen yet when a rank connects (a
// rank 0 started by hand: the others retry while refused), or was opened by
// the launcher before any rank started (a refused connection then means that
// rank 0, which serves it, has exited: the rank fails at once).
enum class ServerSocket { kMayNotListenYet, kOpenedByLauncher };

struct RendezvousClientOptions {
  uint32_t rank = 0;
  uint32_t worldSize = 0;
  uint64_t token = 0;         // the job's, as the server knows it
  int64_t timeoutMs = 30000;  // connecting, and then each call
  ServerSocket serverSocket = ServerSocket::kMayNotListenYet;
};

class RendezvousClient : public OutOfBand {
 public:
  // Connects (retrying until timeoutMs while the server is not up yet, unless
  // its socket was opened by the launcher) and says HELLO.
  static Result<std::unique_ptr<RendezvousClient>> connect(const SocketAddress& server,
                                                           const RendezvousClientOptions& options);

  // Each call waits at most timeoutMs. After an ABORT every call fails at once.
  Result<std::vector<std::string>> allGather(std::string_view mine) override;
  // Tells the server (and so every waiting rank) that this rank gives up. Best effort.
  void abort(std::string_view reason) noexcept;
  // Says BYE: this rank is done with the rendezvous.
  Status finish();

  void setTimeoutMs(int64_t timeoutMs) noexcept { timeoutMs_ = timeoutMs; }

 private:
  RendezvousClient(FileDescriptor fd, const RendezvousClientOptions& options);
  Status sendFrame(RendezvousFrame type, std::string_view payload, uint64_t deadlineNs);

  FileDescriptor fd_;
  uint32_t rank_;
  uint32_t worldSize_;
  uint64_t token_;
  int64_t timeoutMs_;
  uint32_t round_ = 0;
  Status failed_;
};

}  // namespace resilient::hostengine
