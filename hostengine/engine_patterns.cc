// Engine::run: the measured patterns of resilient-nettest (pattern.h),
// each one operation on the engine's host buffers with every byte checked:
// ping-pong, send/recv along the ring, the ring all-reduce, all-to-all. Each
// is one collective for the profiler (profiler_events.h).
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "common/clock.h"
#include "hostengine/data.h"
#include "hostengine/engine.h"
#include "hostengine/engine_internal.h"
#include "hostengine/ring_schedule.h"

namespace resilient::hostengine {
namespace {

// The collective NCCL would run for one operation of `pattern`: the ring
// all-reduce of float32 elements, the others on bytes (all-to-all: `count`
// per peer, as ncclAlltoAll's).
ProfiledColl collectiveOf(Pattern pattern, int nranks, size_t bytes, const void* in,
                          void* out) noexcept {
  ProfiledColl c{.datatype = "ncclUint8", .sendBuff = in, .recvBuff = out};
  switch (pattern) {
    case Pattern::kAllReduce:
      c.func = ProfiledFunc::kAllReduce;
      c.count = bytes / sizeof(float);
      c.datatype = "ncclFloat32";
      break;
    case Pattern::kAllToAll:
      c.func = ProfiledFunc::kAllToAll;
      c.count = bytes / static_cast<size_t>(nranks);
      break;
    case Pattern::kPingPong:
    case Pattern::kSendRecv:
      c.func = ProfiledFunc::kSendRecv;
      c.count = bytes;
      break;
  }
  return c;
}

}  // namespace

std::optional<Fault> Engine::meet(const IterationOptions& options, uint64_t* startNs) {
  profiler_.started();
  if (options.barrier) {
    const uint64_t before = monotonicNs();
    Status st = oob_.barrier();
    if (!st.ok()) {
      Fault f;
      f.call = "barrier (out of band)";
      f.status = std::move(st);
      f.detectedNs = monotonicNs();
      f.sinceStartMs = static_cast<double>(f.detectedNs - before) / 1e6;
      return f;
    }
  }
  *startNs = monotonicNs();
  return std::nullopt;
}

IterationResult Engine::run(size_t bytes, uint64_t iteration, const IterationOptions& options) {
  IterationResult out;
  bytes = std::min(effectiveBytes(options_.pattern, options_.nranks, bytes), maxBytes_);
  profiler_.enqueued(
      collectiveOf(options_.pattern, options_.nranks, bytes, buffer(kInput), buffer(kOutput)));
  switch (options_.pattern) {
    case Pattern::kPingPong: out = runPingPong(bytes, iteration); break;
    case Pattern::kSendRecv: out = runSendRecv(bytes, iteration, options); break;
    case Pattern::kAllReduce: out = runAllReduce(bytes, iteration, options); break;
    case Pattern::kAllToAll: out = runAllToAll(bytes, iteration, options); break;
  }
  if (out.fault) {
    out.fault->bytes = bytes;
    out.fault->iteration = iteration;
  } else {
    profiler_.completed();
  }
  return out;
}

IterationResult Engine::runPingPong(size_t bytes, uint64_t iteration) {
  IterationResult out;
  const int rank = options_.rank;
  const int peer = 1 - rank;
  Link& l = link(peer);
  std::byte* in = buffer(kInput);
  std::byte* outBuf = buffer(kOutput);
  const size_t items = std::max<size_t>(1, (bytes + chunk_ - 1) / chunk_);
  auto chunkOf = [&](std::byte* base, transport::MemoryRegion* mr, size_t item, Piece* p) {
    const ElementRange r = splitRange({0, bytes}, items, item);
    return pieces({.data = base + r.offset, .bytes = r.count, .region = mr}, p);
  };
  auto zeroBytes = [](std::byte* base, transport::MemoryRegion* mr) {
    return [base, mr](size_t, Piece* p) {
      p[0] = Piece{base, 0, mr};
      return 1;
    };
  };
  uint64_t sizeErrors = 0;
  // Rank 1 announces it is in the loop with an empty message; rank 0 starts
  // its clock only then, so that the time is the round trip alone.
  if (rank == 0) {
    fillPattern(in, bytes, streamSeed(0, 1, iteration));
    profiler_.started();
    Stream ready(l.recvComm.get(), peer, 1);
    ready.describe = zeroBytes(outBuf, l.recvMr[kOutput].get());
    const uint64_t readyStart = monotonicNs();
    if ((out.fault = drive({&ready}, readyStart, &sizeErrors))) {
      return out;
    }
    const uint64_t start = monotonicNs();
    Stream pong(l.recvComm.get(), peer, items);
    pong.describe = [&](size_t item, Piece* p) {
      return chunkOf(outBuf, l.recvMr[kOutput].get(), item, p);
    };
    Stream ping(l.sendComm.get(), peer, items);
    ping.describe = [&](size_t item, Piece* p) {
      return chunkOf(in, l.sendMr[kInput].get(), item, p);
    };
    out.fault = drive({&pong, &ping}, start, &sizeErrors);
    out.seconds = static_cast<double>(monotonicNs() - start) / 2e9;
    if (!out.fault) {
      out.errors = sizeErrors + countPatternErrors(outBuf, bytes, streamSeed(1, 0, iteration));
    }
    return out;
  }
  fillPattern(in, bytes, streamSeed(1, 0, iteration));
  profiler_.started();
  const uint64_t start = monotonicNs();
  Stream ping(l.recvComm.get(), peer, items);
  ping.describe = [&](size_t item, Piece* p) {
    return chunkOf(outBuf, l.recvMr[kOutput].get(), item, p);
  };
  Stream ready(l.sendComm.get(), peer, 1);
  ready.describe = zeroBytes(in, l.sendMr[kInput].get());
  ready.ready = [&](size_t) { return ping.posted() > 0; };
  if ((out.fault = drive({&ping, &ready}, start, &sizeErrors))) {
    return out;
  }
  Stream pong(l.sendComm.get(), peer, items);
  pong.describe = [&](size_t item, Piece* p) {
    return chunkOf(in, l.sendMr[kInput].get(), item, p);
  };
  if ((out.fault = drive({&pong}, start, &sizeErrors))) {
    return out;
  }
  out.errors = sizeErrors + countPatternErrors(outBuf, bytes, streamSeed(0, 1, iteration));
  return out;
}

IterationResult Engine::runSendRecv(size_t bytes, uint64_t iteration,
                                    const IterationOptions& options) {
  IterationResult out;
  const int rank = options_.rank;
  std::byte* in = buffer(kInput);
  std::byte* outBuf = buffer(kOutput);
  fillPattern(in, bytes, streamSeed(rank, next(), iteration));
  uint64_t start = 0;
  if ((out.fault = meet(options, &start))) {
    return out;
  }
  const size_t items = std::max<size_t>(1, (bytes + chunk_ - 1) / chunk_);
  Link& to = link(next());
  Link& from = link(prev());
  Stream send(to.sendComm.get(), next(), items);
  send.describe = [&](size_t item, Piece* p) {
    const ElementRange r = splitRange({0, bytes}, items, item);
    return pieces({.data = in + r.offset, .bytes = r.count, .region = to.sendMr[kInput].get()}, p);
  };
  Stream recv(from.recvComm.get(), prev(), items);
  recv.describe = [&](size_t item, Piece* p) {
    const ElementRange r = splitRange({0, bytes}, items, item);
    return pieces(
        {.data = outBuf + r.offset, .bytes = r.count, .region = from.recvMr[kOutput].get()}, p);
  };
  uint64_t sizeErrors = 0;
  out.fault = drive({&recv, &send}, start, &sizeErrors);
  out.seconds = static_cast<double>(monotonicNs() - start) / 1e9;
  if (!out.fault) {
    out.errors =
        sizeErrors + countPatternErrors(outBuf, bytes, streamSeed(prev(), rank, iteration));
  }
  return out;
}

IterationResult Engine::runAllReduce(size_t bytes, uint64_t iteration,
                                     const IterationOptions& options) {
  IterationResult out;
  const size_t count = bytes / sizeof(float);
  const auto* in = reinterpret_cast<const float*>(buffer(kInput));
  auto* acc = reinterpret_cast<float*>(buffer(kOutput));
  fillReduceInput(reinterpret_cast<float*>(buffer(kInput)), count, options_.rank, iteration);
  uint64_t start = 0;
  if ((out.fault = meet(options, &start))) {
    return out;
  }
  // Out of place: the result starts as our input and is reduced in place.
  std::memcpy(acc, in, count * sizeof(float));
  uint64_t sizeErrors = 0;
  out.fault = ringAllReduce(count, start, &sizeErrors);
  out.seconds = static_cast<double>(monotonicNs() - start) / 1e9;
  if (!out.fault) {
    out.errors = sizeErrors + countReduceErrors(acc, count, options_.nranks, iteration);
  }
  return out;
}

IterationResult Engine::runAllToAll(size_t bytes, uint64_t iteration,
                                    const IterationOptions& options) {
  IterationResult out;
  const int rank = options_.rank;
  const int n = options_.nranks;
  const size_t block = bytes / static_cast<size_t>(n);
  std::byte* in = buffer(kInput);
  std::byte* outBuf = buffer(kOutput);
  for (int p = 0; p < n; ++p) {
    fillPattern(in + static_cast<size_t>(p) * block, block, streamSeed(rank, p, iteration));
  }
  uint64_t start = 0;
  if ((out.fault = meet(options, &start))) {
    return out;
  }
  const size_t own = static_cast<size_t>(rank) * block;
  std::memcpy(outBuf + own, in + own, block);
  const size_t items = std::max<size_t>(1, (block + chunk_ - 1) / chunk_);
  std::vector<std::unique_ptr<Stream>> streams;
  streams.reserve(2 * static_cast<size_t>(n));
  // Peers in ring order starting after us, so that not every rank hits rank 0 first.
  for (int k = 1; k < n; ++k) {
    const int p = (rank + k) % n;
    const int q = (rank - k + n) % n;
    Link& to = link(p);
    Link& from = link(q);
    std::byte* src = in + static_cast<size_t>(p) * block;
    std::byte* dst = outBuf + static_cast<size_t>(q) * block;
    auto recv = std::make_unique<Stream>(from.recvComm.get(), q, items);
    recv->describe = [this, dst, block, items, &from](size_t item, Piece* pc) {
      const ElementRange r = splitRange({0, block}, items, item);
      return pieces(
          {.data = dst + r.offset, .bytes = r.count, .region = from.recvMr[kOutput].get()}, pc);
    };
    auto send = std::make_unique<Stream>(to.sendComm.get(), p, items);
    send->describe = [this, src, block, items, &to](size_t item, Piece* pc) {
      const ElementRange r = splitRange({0, block}, items, item);
      return pieces({.data = src + r.offset, .bytes = r.count, .region = to.sendMr[kInput].get()},
                    pc);
    };
    streams.push_back(std::move(recv));
    streams.push_back(std::move(send));
  }
  std::vector<Stream*> list;
  list.reserve(streams.size());
  for (auto& s : streams) {
    list.push_back(s.get());
  }
  uint64_t sizeErrors = 0;
  out.fault = drive(list.data(), list.size(), start, &sizeErrors);
  out.seconds = static_cast<double>(monotonicNs() - start) / 1e9;
  if (!out.fault) {
    out.errors = sizeErrors;
    for (int p = 0; p < n; ++p) {
      out.errors += countPatternErrors(outBuf + static_cast<size_t>(p) * block, block,
                                       streamSeed(p, rank, iteration));
    }
  }
  return out;
}

}  // namespace resilient::hostengine
