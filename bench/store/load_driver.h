// The benchmark's simulated clients: many TCP store connections driven by
// one event loop in one process, speaking the store's wire protocol
// directly (tcp/protocol.h). A real client (TcpStoreClient) spends a reader
// thread per connection, which thousands of simulated ranks per process
// cannot afford; the bytes on the wire are the same.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/net/event_loop.h"
#include "common/net/socket.h"
#include "store/store.h"
#include "store/tcp/frame_decoder.h"

namespace resilient::store::bench {

uint64_t monotonicNs();

// One synchronous connection (the coordinator's probe).
class BlockingConn {
 public:
  BlockingConn(const std::string& host, uint16_t port, const std::string& token,
               const std::string& sourceIp = {});
  // Sends `req` and returns its reply (the only one outstanding).
  tcp::Response call(tcp::StoreRequest req);

 private:
  FileDescriptor fd_;
  tcp::FrameDecoder decoder_{tcp::kDefaultMaxFrameBytes, tcp::FrameKind::kReply};
  uint64_t nextId_ = 1;
};

struct BarrierTimes {
  uint64_t firstSendNs = 0;
  uint64_t lastSendNs = 0;
  uint64_t firstReleaseNs = 0;
  uint64_t lastReleaseNs = 0;
  uint32_t released = 0;
  uint32_t errors = 0;
};

// The server a LoadDriver connects to, and how.
struct LoadDriverOptions {
  std::string host;
  uint16_t port = 0;
  std::string token;
  int connections = 1;
  int firstRank = 0;     // the connections' ranks are firstRank, firstRank+1, ...
  std::string sourceIp;  // bind to this address first when not empty
};

class LoadDriver {
 public:
  // Opens the connections (sequentially, each with its handshake), bound to
  // sourceIp when given (so many processes do not exhaust one address's
  // ephemeral ports).
  explicit LoadDriver(const LoadDriverOptions& options);
  ~LoadDriver();
  LoadDriver(const LoadDriver&) = delete;
  LoadDriver& operator=(const LoadDriver&) = delete;

  // Sends one barrier arrival per connection, except the last one when
  // `holdLast` (the straggler, sent by sendHeld()). Records send times.
  void sendBarrier(const std::string& name, uint64_t generation, int worldSize, bool holdLast,
                   BarrierTimes* times);
  void sendHeld(BarrierTimes* times);
  // Waits for every connection's release (or `timeoutMs`).
  void awaitReleases(BarrierTimes* times, int timeoutMs);

  // Closed loop: every connection keeps one `op` outstanding for
  // `durationMs` (sending none after it); returns the number of operations
  // completed, the last ones in flight included.
  uint64_t runOps(tcp::Op op, int durationMs);

  int connections() const { return static_cast<int>(conns_.size()); }
  // After handling a batch of releases, sleep this long before the next
  // wait of the event loop (0: never), so a burst wakes the process once per batch
  // rather than once per reply (--client-batch-us).
  void setBatchUs(int us) { batchUs_ = us; }

 private:
  struct Conn {
    FileDescriptor fd;
    int rank = 0;
    tcp::FrameDecoder decoder{64 * 1024, tcp::FrameKind::kReply};
    bool done = false;
  };
  void sendFrame(Conn& c, const std::string& frame);
  // Reads what is ready on `c`; returns the replies completed.
  int drain(Conn& c, uint32_t* errors);

  std::vector<Conn> conns_;
  EventLoop events_;
  std::string heldFrame_;
  std::string name_;
  uint64_t generation_ = 0;
  int worldSize_ = 0;
  int batchUs_ = 0;
};

}  // namespace resilient::store::bench
