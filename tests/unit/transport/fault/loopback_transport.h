// An in-memory Transport for the fault-injection tests: listen/connect/accept
// make loopback pairs inside one object, sends are copied into the matching
// receive with memcpy. Progress is sender-driven, as with a socket: a send
// moves its bytes when the sender tests it and a matching receive is posted,
// so a stalled sender also starves its receiver. Closing one side makes the
// other side's pending requests fail with a remote error (EOF).
//
// It counts calls and records double closes, and keeps every comm alive until
// it is destroyed so that a second close is detected instead of undefined.
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

class LoopbackTransport : public transport::Transport {
 public:
  explicit LoopbackTransport(int maxRecvs = 4);
  ~LoopbackTransport() override;

  // Peer addresses: a send comm's peer is the listener's address, a receive
  // comm's peer is "10.0.0.1:<50000 + connection number>".
  void setNextListenAddress(std::string address) { nextListenAddress_ = std::move(address); }

  // Observations.
  int isendCalls = 0;
  int irecvCalls = 0;
  int testCalls = 0;
  int closeCalls = 0;
  int doubleCloses = 0;
  bool isComm(const void* comm) const;
  bool isClosed(const void* comm) const;

  const char* name() const noexcept override { return "loopback"; }
  Status initContext(uint64_t commId, const transport::CommConfig& config, void** ctx) override;
  Status finalizeContext(void* ctx) override;
  Status devices(int* ndev) override;
  Status properties(int dev, transport::Properties* props) override;
  size_t handleBytes() const noexcept override { return sizeof(uint64_t); }

  Status listen(void* ctx, int dev, void* handle, void** listenComm) override;
  Status connect(void* ctx, int dev, void* handle, void** sendComm) override;
  Status accept(void* listenComm, void** recvComm) override;

  Status regMr(void* comm, void* data, size_t size, int type, void** mhandle) override;
  Status deregMr(void* comm, void* mhandle) override;

  Status isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,
               void** request) override;
  Status irecv(void* recvComm, int n, void** data, const size_t* sizes, const int* tags,
               void** mhandles, void** phandles, void** request) override;
  Status iflush(void* recvComm, int n, void** data, const int* sizes, void** mhandles,
                void** request) override;
  Status test(void* request, int* done, int* sizes) override;

  Status closeSend(void* sendComm) override;
  Status closeRecv(void* recvComm) override;
  Status closeListen(void* listenComm) override;

  bool bytesMoved(void* comm, uint64_t* bytes) noexcept override;
  bool endpoints(void* comm, transport::Endpoint* local,
                 transport::Endpoint* peer) noexcept override;

 private:
  struct LoopbackConnection;
  struct FakeComm;
  struct FakeRequest;
  struct FakeListen;

  Status closeComm(void* comm, bool isSend);
  // Moves the bytes of `send` into the first receive that waits for its tag.
  Status pushSend(FakeRequest& send);

  int maxRecvs_;
  std::string nextListenAddress_ = "10.0.0.2:40000";
  int connections_ = 0;
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<FakeListen>> listens_;
  std::vector<std::unique_ptr<LoopbackConnection>> connectionStore_;
  std::vector<std::unique_ptr<FakeComm>> comms_;
  std::deque<std::unique_ptr<FakeRequest>> requests_;
};

// A clock the test moves by hand; starts at 1 s so that 0 is never "now".
class FakeClock {
 public:
  uint64_t now() const { return ns_.load(std::memory_order_relaxed); }
  void advanceMs(uint64_t ms) { ns_.fetch_add(ms * 1000000, std::memory_order_relaxed); }
  void advanceNs(uint64_t ns) { ns_.fetch_add(ns, std::memory_order_relaxed); }
  // A std::function view for FaultTransport; the FakeClock must outlive it.
  auto function() {
    return [this] { return now(); };
  }

 private:
  std::atomic<uint64_t> ns_{1000000000};
};

}  // namespace resilient::test
