// The helper threads of one connection: they move the striped part of large
// messages over the data sockets while the proxy thread serves the control
// socket.
//
// Striping: a message of S bytes is cut into chunks of C bytes (the last one
// shorter); chunk i goes to data socket (base + i) % nSocks, where base is a
// per-connection chunk counter that both sides advance by the message's chunk
// count in stream order. Both sides therefore derive the same assignment, and
// each data socket carries, message after message, exactly the chunks it was
// given, in order.
//
// Hand-off: the proxy thread posts one Item per (message, data socket) into
// that socket's preallocated single-producer single-consumer ring and wakes
// the socket's thread (an atomic sequence word with wait/notify when the
// thread is idle, an eventfd when it is blocked in poll()). No mutex and no
// allocation per request. A thread completes an Item, pops it, then
// decrements the Item's pending counter (release): the proxy thread sees the
// message done with an acquire load.
//
// Threads: thread t owns the data sockets s with s % nThreads == t. Every
// socket call is non-blocking; a thread sleeps only in wait() or poll().
// With nThreads == 0 there are no helper threads: the proxy thread moves the
// bytes itself in pump(), called from test() (on few cores this avoids a
// hand-off and a context switch per message).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "common/net/socket.h"
#include "common/status.h"

namespace resilient::transport::tcp {

// Items a data socket's ring holds: every outstanding message may have one
// (send side: kMaxRequests * maxRecvs requests; receive side: kMaxRequests
// requests of up to 8 messages).
inline constexpr uint32_t kRingCapacity = 256;

class StripeEngine {
 public:
  enum class Direction { kSend, kRecv };

  // The part of one message that one data socket carries.
  struct Item {
    std::byte* base = nullptr;                 // the message's buffer
    uint64_t size = 0;                         // the message's bytes
    uint32_t firstChunk = 0;                   // this socket's first chunk of the message
    std::atomic<uint32_t>* pending = nullptr;  // decremented once when done
  };

  // `bytesMoved` is incremented (relaxed) by every byte the threads move.
  StripeEngine(Direction direction, uint32_t chunkBytes, std::atomic<uint64_t>* bytesMoved);
  ~StripeEngine();
  StripeEngine(const StripeEngine&) = delete;
  StripeEngine& operator=(const StripeEngine&) = delete;

  // Takes the data sockets (in index order) and starts min(nThreads, sockets)
  // threads (none when nThreads <= 0: inline mode, see pump()).
  Status start(std::vector<FileDescriptor> sockets, int nThreads);

  int sockets() const noexcept { return static_cast<int>(lanes_.size()); }
  // The descriptor of data socket `lane` (0 <= lane < sockets()).
  int socketFd(int lane) const noexcept;
  bool inlineMode() const noexcept { return workers_.empty(); }
  uint32_t chunkBytes() const noexcept { return chunkBytes_; }

  static uint64_t chunkCount(uint64_t size, uint32_t chunkBytes) noexcept {
    return (size + chunkBytes - 1) / chunkBytes;
  }
  // Items a message of `size` bytes needs: min(chunks, data sockets).
  uint32_t itemCount(uint64_t size) const noexcept;
  // Proxy thread only, in stream order. Queues the striped part of one message
  // (`pending` must already count itemCount(size) more) and wakes the threads
  // concerned. False when a ring is full, which the request limits exclude.
  bool postMessage(std::byte* base, uint64_t size, std::atomic<uint32_t>* pending) noexcept;

  // Inline mode only (no-op otherwise): the proxy thread moves what the data
  // sockets accept or hold right now, without blocking.
  void pump() noexcept;

  // The first failure of a helper thread: true with the errno (0: end of file)
  // and the data socket index. Any thread may call it.
  bool failed(int* err, int* socket) const noexcept;

  // Stops and joins the threads; shuts the sockets down first so that no
  // thread waits on a dead peer. Idempotent.
  void stop() noexcept;

 private:
  struct Lane;
  struct Worker;

  void run(Worker* worker) noexcept;
  void wake(Worker* worker) noexcept;
  // One non-blocking socket call on the lane's head item. Returns false on a
  // socket failure (recorded with fail()).
  bool serviceLane(Lane* lane, int index, bool* progressed, bool* blocked) noexcept;
  void fail(int err, int socket) noexcept;

  const Direction direction_;
  const uint32_t chunkBytes_;
  std::atomic<uint64_t>* const bytesMoved_;
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::vector<std::unique_ptr<Worker>> workers_;
  uint64_t chunkCounter_ = 0;  // proxy thread only
  std::atomic<bool> stop_{false};
  // Failure: kNoFailure, kRecording, then kFailed once err/socket are written.
  std::atomic<int> failState_{0};
  int failErrno_ = 0;
  int failSocket_ = -1;
};

}  // namespace resilient::transport::tcp
