// What runs on the ring (the connections to next and prev): the pipelined
// ring all-reduce (ring_schedule.h) and broadcast on the output buffer, and
// the user-data operations of the host communicator built on them
// (allReduceSum, broadcast, barrier), in blocks of at most setup's maxBytes;
// each user-data operation is one collective for the profiler, whatever its
// number of blocks.
#include <algorithm>
#include <cstring>

#include "common/clock.h"
#include "hostengine/engine.h"
#include "hostengine/engine_internal.h"
#include "hostengine/ring_schedule.h"

namespace resilient::hostengine {

std::optional<Fault> Engine::ringAllReduce(size_t count, uint64_t startNs, uint64_t* sizeErrors) {
  auto* acc = reinterpret_cast<float*>(buffer(kOutput));
  std::byte* staging = buffer(kStaging);
  const RingSchedule ring({.nranks = options_.nranks,
                           .rank = options_.rank,
                           .count = count,
                           .chunkElements = chunk_ / sizeof(float)});
  const size_t depth = static_cast<size_t>(limits_.depth);
  Link& to = link(next());
  Link& from = link(prev());
  auto stagingSlot = [&](size_t item) { return staging + (item % depth) * chunk_; };

  Stream send(to.sendComm.get(), next(), ring.items());
  Stream recv(from.recvComm.get(), prev(), ring.items());
  send.describe = [&](size_t item, Piece* p) {
    const ElementRange r = ring.sendChunk(item);
    return pieces({.data = reinterpret_cast<std::byte*>(acc + r.offset),
                   .bytes = r.count * sizeof(float),
                   .unit = sizeof(float),
                   .region = to.sendMr[kOutput].get()},
                  p);
  };
  send.ready = [&](size_t item) { return recv.done() >= ring.recvsBeforeSend(item); };
  recv.describe = [&](size_t item, Piece* p) {
    const ElementRange r = ring.recvChunk(item);
    if (ring.isReduce(item)) {
      return pieces({.data = stagingSlot(item),
                     .bytes = r.count * sizeof(float),
                     .unit = sizeof(float),
                     .region = from.recvMr[kStaging].get()},
                    p);
    }
    return pieces({.data = reinterpret_cast<std::byte*>(acc + r.offset),
                   .bytes = r.count * sizeof(float),
                   .unit = sizeof(float),
                   .region = from.recvMr[kOutput].get()},
                  p);
  };
  recv.ready = [&](size_t item) { return send.done() >= ring.sendsBeforeRecv(item); };
  recv.completed = [&](size_t item) {
    if (!ring.isReduce(item)) {
      return;
    }
    const ElementRange r = ring.recvChunk(item);
    const auto* add = reinterpret_cast<const float*>(stagingSlot(item));
    float* dst = acc + r.offset;
    for (size_t i = 0; i < r.count; ++i) {
      dst[i] += add[i];
    }
  };
  return drive({&recv, &send}, startNs, sizeErrors);
}

std::optional<Fault> Engine::ringBroadcast(size_t bytes, int root, uint64_t startNs,
                                           uint64_t* sizeErrors) {
  // Along the ring from the root: every rank but the root receives each
  // chunk from prev, every rank but the one before the root forwards it.
  std::byte* data = buffer(kOutput);
  const size_t items = std::max<size_t>(1, (bytes + chunk_ - 1) / chunk_);
  const bool receives = options_.rank != root;
  const bool sends = next() != root;
  Link& to = link(next());
  Link& from = link(prev());
  Stream recv(from.recvComm.get(), prev(), receives ? items : 0);
  recv.describe = [&](size_t item, Piece* p) {
    const ElementRange r = splitRange({0, bytes}, items, item);
    return pieces({.data = data + r.offset, .bytes = r.count, .region = from.recvMr[kOutput].get()},
                  p);
  };
  Stream send(to.sendComm.get(), next(), sends ? items : 0);
  send.describe = [&](size_t item, Piece* p) {
    const ElementRange r = splitRange({0, bytes}, items, item);
    return pieces({.data = data + r.offset, .bytes = r.count, .region = to.sendMr[kOutput].get()},
                  p);
  };
  if (receives) {
    send.ready = [&](size_t item) { return recv.done() > item; };
  }
  return drive({&recv, &send}, startNs, sizeErrors);
}

std::optional<Fault> Engine::userOperationFault(const char* call, uint64_t startNs) const {
  if (aborted()) {
    return abortedFault(call, startNs);
  }
  if (options_.pattern != Pattern::kAllReduce || buffers_.size() != kBufferCount ||
      maxBytes_ < sizeof(float)) {
    return Fault::seen(
        {.call = call,
         .status = invalidUsage("the engine is not set up for user data (needs the "
                                "all-reduce pattern and buffers of at least 4 bytes)"),
         .startNs = startNs,
         .warningBaseline = limits_.warningBaseline});
  }
  return std::nullopt;
}

Fault Engine::sizeFault(const char* call, uint64_t sizeErrors, uint64_t startNs) {
  Fault f;
  f.call = call;
  f.status = invalidUsage(std::to_string(sizeErrors) +
                          " bytes arrived with another size than expected: do all ranks pass "
                          "the same count (and root)?");
  f.detectedNs = monotonicNs();
  f.sinceStartMs = static_cast<double>(f.detectedNs - startNs) / 1e6;
  return f;
}

std::optional<Fault> Engine::allReduceSum(const float* in, float* out, size_t count) {
  const uint64_t start = monotonicNs();
  if (auto fault = userOperationFault("allReduce", start)) {
    return fault;
  }
  profiler_.enqueued({.func = ProfiledFunc::kAllReduce,
                      .count = count,
                      .datatype = "ncclFloat32",
                      .sendBuff = in,
                      .recvBuff = out});
  profiler_.started();
  auto* acc = reinterpret_cast<float*>(buffer(kOutput));
  const size_t block = maxBytes_ / sizeof(float);
  for (size_t done = 0; done < count;) {
    const size_t n = std::min(block, count - done);
    std::memmove(acc, in + done, n * sizeof(float));
    uint64_t sizeErrors = 0;
    if (auto fault = ringAllReduce(n, start, &sizeErrors)) {
      fault->bytes = n * sizeof(float);
      return fault;
    }
    if (sizeErrors != 0) {
      return sizeFault("allReduce", sizeErrors, start);
    }
    std::memcpy(out + done, acc, n * sizeof(float));
    done += n;
  }
  profiler_.completed();
  return std::nullopt;
}

std::optional<Fault> Engine::broadcast(void* data, size_t bytes, int root) {
  const uint64_t start = monotonicNs();
  if (auto fault = userOperationFault("broadcast", start)) {
    return fault;
  }
  if (root < 0 || root >= options_.nranks) {
    return Fault::seen({.call = "broadcast",
                        .status = invalidUsage("root " + std::to_string(root) + " outside 0.." +
                                               std::to_string(options_.nranks - 1)),
                        .startNs = start,
                        .warningBaseline = limits_.warningBaseline});
  }
  profiler_.enqueued({.func = ProfiledFunc::kBroadcast,
                      .count = bytes,
                      .datatype = "ncclUint8",
                      .root = root,
                      .sendBuff = data,
                      .recvBuff = data});
  profiler_.started();
  auto* user = static_cast<std::byte*>(data);
  std::byte* staged = buffer(kOutput);
  for (size_t done = 0; done < bytes;) {
    const size_t n = std::min(maxBytes_, bytes - done);
    if (options_.rank == root) {
      std::memcpy(staged, user + done, n);
    }
    uint64_t sizeErrors = 0;
    if (auto fault = ringBroadcast(n, root, start, &sizeErrors)) {
      fault->bytes = n;
      return fault;
    }
    if (sizeErrors != 0) {
      return sizeFault("broadcast", sizeErrors, start);
    }
    if (options_.rank != root) {
      std::memcpy(user + done, staged, n);
    }
    done += n;
  }
  profiler_.completed();
  return std::nullopt;
}

std::optional<Fault> Engine::barrier() {
  const uint64_t start = monotonicNs();
  if (auto fault = userOperationFault("barrier", start)) {
    return fault;
  }
  // An all-reduce of nothing, as the profiler sees it too.
  profiler_.enqueued({.func = ProfiledFunc::kAllReduce, .count = 0, .datatype = "ncclFloat32"});
  profiler_.started();
  uint64_t sizeErrors = 0;
  if (auto fault = ringAllReduce(0, start, &sizeErrors)) {
    return fault;
  }
  if (sizeErrors != 0) {
    return sizeFault("barrier", sizeErrors, start);
  }
  profiler_.completed();
  return std::nullopt;
}

}  // namespace resilient::hostengine
