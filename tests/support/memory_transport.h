// The in-memory Transport of the tests (the host engine's ranks as threads,
// the fault-injection decorator over it): listen/connect/accept make
// connections inside one object (any number per listener, accepted in
// order), and every call may come from any thread (one mutex).
//
// Progress is sender-driven, as with a socket: a send moves its bytes into
// the oldest posted receive of its connection when the sender tests it
// (sends in posting order), so a stalled sender also starves its receiver.
// Within a grouped receive a message goes to the free buffer of its tag; a
// message that matches no free buffer, or is larger than its buffer, fails
// the connection like a protocol error (a remote error on both sides, for
// good). Closing one side makes the other side's pending requests, and its
// later sends, fail with a remote error (EOF). A flush completes at once.
//
// Its listeners and comms are objects the caller owns (transport.h); each
// comm owns its requests (a fixed pool) and makes trivial memory regions.
// The connections and listen points live until the transport is destroyed,
// so a peer's close is seen after the peer's object is gone.
//
// For the tests' checks it counts calls and the most requests a comm had
// outstanding, reports the bytes moved and made-up endpoints, and can be
// told to fail every test() after a number of calls, or to stall. A stalled
// link, or one whose test() calls fail, carries nothing: no bytes move and
// no close reaches the peer (each rank then ends with its own timeout or
// injected failure, whichever rank gives up first).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "plugin/transport/transport.h"

namespace resilient::test {

class MemoryTransport : public transport::Transport {
 public:
  // `maxRecvs`: the largest grouped receive (Properties::maxRecvs);
  // `forceFlush`: Properties::forceFlush.
  explicit MemoryTransport(int maxRecvs = 8, bool forceFlush = false);
  ~MemoryTransport() override;

  // Endpoints: a send comm's peer is its listener's address (this one for
  // the next listen), a receive comm's peer "10.0.0.1:<50000 + connection>".
  void setNextListenAddress(std::string address);
  // Every test() after `calls` test() calls returns a remote error
  // ("memory: injected failure").
  void failTestsAfter(int64_t calls) { failAfter_.store(calls); }
  // Nothing moves while set.
  void stall(bool on) { stalled_.store(on); }
  // test() leaves `sizes` unwritten, as some real plugins do (NCCL tolerates it).
  void reportSizes(bool on) { reportSizes_.store(on); }

  // Observations.
  std::atomic<int> isendCalls{0};
  std::atomic<int> irecvCalls{0};
  std::atomic<int64_t> testCalls{0};
  std::atomic<int> flushes{0};       // iflush calls
  std::atomic<int> groupedRecvs{0};  // irecv calls with n > 1
  std::atomic<int> maxSendOutstanding{0};
  std::atomic<int> maxRecvOutstanding{0};
  std::atomic<int> liveComms{0};   // send and receive comms handed out and not closed
  std::atomic<int> closeCalls{0};  // close() of send and receive comms (a destructor's too)
  // Whether `comm` is a send or receive comm this transport made (and not
  // some decorator's object).
  bool made(const transport::Comm& comm) const noexcept;

  const char* name() const noexcept override { return "memory"; }
  Status initContext(uint64_t commId, const transport::CommConfig& config,
                     std::unique_ptr<transport::Context>* ctx) override;
  Status devices(int* ndev) override;
  Status properties(int dev, transport::Properties* props) override;
  size_t handleBytes() const noexcept override { return 16; }

  Status listen(transport::Context* ctx, int dev, std::byte* handle,
                std::unique_ptr<transport::Listener>* listener) override;
  Status connect(transport::Context* ctx, int dev, std::byte* handle,
                 transport::DeviceHandleRequest wantDeviceHandle,
                 std::unique_ptr<transport::SendComm>* comm) override;

 private:
  struct Connection;
  struct ListenPoint;
  struct CommState;
  class MemoryRequest;
  class Region;
  class MemoryListener;
  class MemorySendComm;
  class MemoryRecvComm;

  // Whether a close reaches the peer now: not while stalled, nor once
  // test() failures are injected.
  bool closeSeen() const;
  // Moves the bytes of `send` (the oldest unmoved send of its connection)
  // into the oldest posted receive, if there is one. Caller holds mutex_.
  Status pushSend(MemoryRequest& send);
  // Request::test of every request of this transport.
  Status test(MemoryRequest& request, int* done, int* sizes);

  int maxRecvs_;
  bool forceFlush_;
  std::atomic<int64_t> failAfter_{-1};
  std::atomic<bool> stalled_{false};
  std::atomic<bool> reportSizes_{true};
  mutable std::mutex mutex_;
  std::string nextListenAddress_ = "10.0.0.2:40000";
  int connectionCount_ = 0;
  // Indexed by the listener id in the handle, minus one.
  std::vector<std::unique_ptr<ListenPoint>> listens_;
  std::vector<std::unique_ptr<Connection>> connections_;
};

}  // namespace resilient::test
