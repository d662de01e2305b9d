#include "plugin/transport/tcp/stripe_engine.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <system_error>

#include "common/log.h"

namespace resilient::transport::tcp {
namespace {

constexpr int kNoFailure = 0;
constexpr int kRecording = 1;
constexpr int kFailed = 2;
// Chunks one socket call covers at most (one iovec each).
constexpr int kMaxIov = 16;
// poll() timeout of a blocked helper: a safety net only (posts and stop wake it).
constexpr int kPollTimeoutMs = 1000;

}  // namespace

struct StripeEngine::Lane {
  FileDescriptor fd;
  int worker = 0;
  // Producer (proxy thread) and consumer (helper thread) indices, on separate lines.
  alignas(64) std::atomic<uint32_t> tail{0};
  alignas(64) std::atomic<uint32_t> head{0};
  // Consumer's cursor in the head item: the chunk (index within the message)
  // and the bytes of it already moved.
  bool started = false;
  uint64_t chunk = 0;
  uint64_t offset = 0;
  Item items[kRingCapacity];
};

struct StripeEngine::Worker {
  std::thread thread;
  alignas(64) std::atomic<uint32_t> seq{0};  // bumped by every post; waited on when idle
  std::atomic<bool> polling{false};          // true while blocked in poll()
  FileDescriptor eventFd;                    // wakes poll()
  std::vector<int> lanes;
  std::vector<pollfd> pollFds;  // preallocated: lanes + eventfd
  bool needsWake = false;       // proxy thread only
};

int StripeEngine::socketFd(int lane) const noexcept {
  return lanes_[static_cast<size_t>(lane)]->fd.get();
}

StripeEngine::StripeEngine(Direction direction, uint32_t chunkBytes,
                           std::atomic<uint64_t>* bytesMoved)
    : direction_(direction), chunkBytes_(chunkBytes), bytesMoved_(bytesMoved) {}

StripeEngine::~StripeEngine() {
  stop();
}

Status StripeEngine::start(std::vector<FileDescriptor> sockets, int nThreads) {
  if (sockets.empty()) {
    return internalError("tcp: a connection without data sockets");
  }
  const int nLanes = static_cast<int>(sockets.size());
  // nThreads <= 0: no helper threads; the proxy thread pumps the lanes in pump().
  const int nWorkers = nThreads <= 0 ? 0 : std::min(nThreads, nLanes);
  for (int i = 0; i < nWorkers; ++i) {
    auto w = std::make_unique<Worker>();
    const int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (efd < 0) {
      return systemError("tcp: eventfd");
    }
    w->eventFd.reset(efd);
    workers_.push_back(std::move(w));
  }
  for (int i = 0; i < nLanes; ++i) {
    auto lane = std::make_unique<Lane>();
    lane->fd = std::move(sockets[i]);
    if (nWorkers > 0) {
      lane->worker = i % nWorkers;
      workers_[lane->worker]->lanes.push_back(i);
    }
    lanes_.push_back(std::move(lane));
  }
  for (auto& w : workers_) {
    w->pollFds.resize(w->lanes.size() + 1);
  }
  for (auto& w : workers_) {
    try {
      Worker* worker = w.get();
      w->thread = std::thread([this, worker] { run(worker); });
    } catch (const std::system_error& e) {
      stop();
      return systemError("tcp: cannot start a helper thread", e.code().value());
    }
  }
  return {};
}

uint32_t StripeEngine::itemCount(uint64_t size) const noexcept {
  const uint64_t chunks = chunkCount(size, chunkBytes_);
  return static_cast<uint32_t>(std::min<uint64_t>(chunks, lanes_.size()));
}

bool StripeEngine::postMessage(std::byte* base, uint64_t size,
                               std::atomic<uint32_t>* pending) noexcept {
  const uint64_t chunks = chunkCount(size, chunkBytes_);
  if (chunks == 0) {
    return true;
  }
  const uint64_t nLanes = lanes_.size();
  const uint64_t used = std::min<uint64_t>(chunks, nLanes);
  const uint64_t first = chunkCounter_ % nLanes;
  // Check every ring first so that a message is posted entirely or not at all.
  for (uint64_t i = 0; i < used; ++i) {
    const Lane& lane = *lanes_[(first + i) % nLanes];
    if (lane.tail.load(std::memory_order_relaxed) - lane.head.load(std::memory_order_acquire) >=
        kRingCapacity) {
      return false;
    }
  }
  for (uint64_t i = 0; i < used; ++i) {
    Lane& lane = *lanes_[(first + i) % nLanes];
    const uint32_t tail = lane.tail.load(std::memory_order_relaxed);
    lane.items[tail % kRingCapacity] = Item{base, size, static_cast<uint32_t>(i), pending};
    lane.tail.store(tail + 1, std::memory_order_release);
    if (!workers_.empty()) {
      workers_[lane.worker]->needsWake = true;
    }
  }
  chunkCounter_ += chunks;
  for (auto& w : workers_) {
    if (w->needsWake) {
      w->needsWake = false;
      wake(w.get());
    }
  }
  return true;
}

void StripeEngine::wake(Worker* worker) noexcept {
  // seq_cst on both sides: either the worker sees the new seq before it
  // sleeps in poll(), or this thread sees `polling` and writes the eventfd.
  worker->seq.fetch_add(1, std::memory_order_seq_cst);
  worker->seq.notify_one();
  if (worker->polling.load(std::memory_order_seq_cst)) {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(worker->eventFd.get(), &one, sizeof one);
  }
}

bool StripeEngine::failed(int* err, int* socket) const noexcept {
  if (failState_.load(std::memory_order_acquire) != kFailed) {
    return false;
  }
  *err = failErrno_;
  *socket = failSocket_;
  return true;
}

void StripeEngine::fail(int err, int socket) noexcept {
  int expected = kNoFailure;
  if (failState_.compare_exchange_strong(expected, kRecording, std::memory_order_acq_rel)) {
    failErrno_ = err;
    failSocket_ = socket;
    failState_.store(kFailed, std::memory_order_release);
  }
}

void StripeEngine::stop() noexcept {
  stop_.store(true, std::memory_order_release);
  for (auto& lane : lanes_) {
    if (lane->fd.valid()) {
      ::shutdown(lane->fd.get(), SHUT_RDWR);
    }
  }
  for (auto& w : workers_) {
    wake(w.get());
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(w->eventFd.get(), &one, sizeof one);
  }
  for (auto& w : workers_) {
    if (w->thread.joinable()) {
      w->thread.join();
    }
  }
  for (auto& lane : lanes_) {
    lane->fd.reset();
  }
}

bool StripeEngine::serviceLane(Lane* lane, int index, bool* progressed, bool* blocked) noexcept {
  const uint32_t head = lane->head.load(std::memory_order_relaxed);
  if (head == lane->tail.load(std::memory_order_acquire)) {
    return true;  // nothing queued
  }
  const Item& item = lane->items[head % kRingCapacity];
  const uint64_t chunks = chunkCount(item.size, chunkBytes_);
  const uint64_t stride = lanes_.size();
  if (!lane->started) {
    lane->started = true;
    lane->chunk = item.firstChunk;
    lane->offset = 0;
  }
  iovec iov[kMaxIov];
  int nIov = 0;
  uint64_t offset = lane->offset;
  for (uint64_t c = lane->chunk; c < chunks && nIov < kMaxIov; c += stride) {
    const uint64_t start = c * chunkBytes_;
    const uint64_t len = std::min<uint64_t>(chunkBytes_, item.size - start);
    iov[nIov].iov_base = item.base + start + offset;
    iov[nIov].iov_len = len - offset;
    ++nIov;
    offset = 0;
  }
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = static_cast<size_t>(nIov);
  const int fd = lane->fd.get();
  const ssize_t n = direction_ == Direction::kSend
                        ? ::sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL)
                        : ::recvmsg(fd, &msg, MSG_DONTWAIT);
  if (n < 0) {
    const int err = errno;
    if (err == EAGAIN || err == EWOULDBLOCK) {
      *blocked = true;
      return true;
    }
    if (err == EINTR) {
      *progressed = true;
      return true;
    }
    fail(err, index);
    return false;
  }
  if (n == 0) {
    fail(0, index);  // end of file (a receive of at least one byte returned nothing)
    return false;
  }
  bytesMoved_->fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
  *progressed = true;
  uint64_t moved = static_cast<uint64_t>(n);
  while (moved > 0) {
    const uint64_t start = lane->chunk * chunkBytes_;
    const uint64_t left = std::min<uint64_t>(chunkBytes_, item.size - start) - lane->offset;
    if (moved >= left) {
      moved -= left;
      lane->chunk += stride;
      lane->offset = 0;
    } else {
      lane->offset += moved;
      moved = 0;
    }
  }
  if (lane->chunk >= chunks) {
    // Pop before signalling: once the request is released the proxy may post
    // again, and the ring must have room for it.
    std::atomic<uint32_t>* pending = item.pending;
    lane->started = false;
    lane->head.store(head + 1, std::memory_order_release);
    pending->fetch_sub(1, std::memory_order_acq_rel);
  }
  return true;
}

void StripeEngine::pump() noexcept {
  if (!workers_.empty() || stop_.load(std::memory_order_acquire)) {
    return;
  }
  // Until every lane is idle or would block; each pass is one non-blocking
  // socket call per lane with work.
  for (;;) {
    bool progressed = false;
    bool blocked = false;
    for (size_t i = 0; i < lanes_.size(); ++i) {
      if (!serviceLane(lanes_[i].get(), static_cast<int>(i), &progressed, &blocked)) {
        return;
      }
    }
    if (!progressed) {
      return;
    }
  }
}

void StripeEngine::run(Worker* worker) noexcept {
  const short wantEvent = direction_ == Direction::kSend ? POLLOUT : POLLIN;
  for (;;) {
    const uint32_t seen = worker->seq.load(std::memory_order_acquire);
    if (stop_.load(std::memory_order_acquire)) {
      return;
    }
    bool progressed = false;
    bool blocked = false;
    for (const int index : worker->lanes) {
      if (!serviceLane(lanes_[index].get(), index, &progressed, &blocked)) {
        return;  // the connection failed; the proxy thread reports it
      }
    }
    if (progressed) {
      continue;
    }
    if (!blocked) {
      worker->seq.wait(seen, std::memory_order_acquire);
      continue;
    }
    // Work is queued but every socket with work would block: sleep in poll()
    // on those sockets and the eventfd (new work for an idle socket, or stop).
    worker->polling.store(true, std::memory_order_seq_cst);
    if (worker->seq.load(std::memory_order_seq_cst) != seen ||
        stop_.load(std::memory_order_acquire)) {
      worker->polling.store(false, std::memory_order_relaxed);
      continue;
    }
    nfds_t nfds = 0;
    for (const int index : worker->lanes) {
      Lane& lane = *lanes_[index];
      if (lane.head.load(std::memory_order_relaxed) != lane.tail.load(std::memory_order_acquire)) {
        worker->pollFds[nfds++] = pollfd{lane.fd.get(), wantEvent, 0};
      }
    }
    worker->pollFds[nfds++] = pollfd{worker->eventFd.get(), POLLIN, 0};
    ::poll(worker->pollFds.data(), nfds, kPollTimeoutMs);
    worker->polling.store(false, std::memory_order_relaxed);
    if ((worker->pollFds[nfds - 1].revents & POLLIN) != 0) {
      uint64_t value = 0;
      [[maybe_unused]] const ssize_t n = ::read(worker->eventFd.get(), &value, sizeof value);
    }
  }
}

}  // namespace resilient::transport::tcp
