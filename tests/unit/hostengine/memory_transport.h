// An in-memory Transport shared by several ranks (threads) of one process,
// for the host engine tests: comms are channels inside one object guarded by
// one mutex; a receive matches the sends of its channel in posting order and,
// within a grouped receive, by tag (a tag that matches no free buffer, or a
// send larger than its buffer, fails the channel like a protocol error). It
// records the most requests each comm had outstanding, and can be told to
// fail every test() after a number of calls, or to stall.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "plugin/transport/transport.h"

namespace resilient::test {

class MemoryTransport : public transport::Transport {
 public:
  explicit MemoryTransport(int maxRecvs = 8, bool forceFlush = false);
  ~MemoryTransport() override;

  // Observations.
  std::atomic<int> maxSendOutstanding{0};
  std::atomic<int> maxRecvOutstanding{0};
  std::atomic<int> groupedRecvs{0};  // irecv calls with n > 1
  std::atomic<int> liveComms{0};
  std::atomic<int> flushes{0};  // iflush calls
  // Every test() after `calls` test() calls returns a remote error.
  void failTestsAfter(int64_t calls) { failAfter_.store(calls); }
  // No request completes while set.
  void stall(bool on) { stalled_.store(on); }

  const char* name() const noexcept override { return "memory"; }
  Status initContext(uint64_t commId, const transport::CommConfig& config, void** ctx) override;
  Status finalizeContext(void* ctx) override;
  Status devices(int* ndev) override;
  Status properties(int dev, transport::Properties* props) override;
  size_t handleBytes() const noexcept override { return 16; }
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

 private:
  struct MemoryRequest;
  struct Channel;
  struct Comm {
    Channel* channel = nullptr;
    bool send = false;
    int outstanding = 0;
  };
  Status progress(Channel& channel);

  int maxRecvs_;
  bool forceFlush_;
  std::atomic<int64_t> failAfter_{-1};
  std::atomic<int64_t> testCalls_{0};
  std::atomic<bool> stalled_{false};
  std::mutex mutex_;
  std::vector<std::unique_ptr<Channel>> channels_;
  std::set<MemoryRequest*> live_;  // requests not released by a done test() (freed at the end)
};

}  // namespace resilient::test
