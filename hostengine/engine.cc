#include "hostengine/engine.h"

#include <sched.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>

#include "common/clock.h"
#include "common/little_endian.h"
#include "common/log.h"
#include "hostengine/data.h"
#include "hostengine/plugin_log.h"
#include "hostengine/ring_schedule.h"

namespace resilient::hostengine {

struct Engine::Link {
  bool sends = false;  // this rank sends to the peer
  bool recvs = false;  // this rank receives from the peer
  void* listenComm = nullptr;
  void* sendComm = nullptr;
  void* recvComm = nullptr;
  // connect() may write to the handle between polls (NCCL's socket and IB
  // plugins keep their state there): writable, and stable across the polls.
  std::array<char, transport::kHandleSize> connectHandle{};
  std::array<void*, kBufferCount> sendMh{};
  std::array<bool, kBufferCount> sendRegistered{};
  std::array<void*, kBufferCount> recvMh{};
  std::array<bool, kBufferCount> recvRegistered{};
};

struct Engine::Buffer {
  char* data = nullptr;
  size_t bytes = 0;
};

namespace {

constexpr size_t kAlignment = 4096;

char* allocate(size_t bytes) {
  void* p = nullptr;
  const size_t rounded = std::max(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
  if (posix_memalign(&p, kAlignment, rounded) != 0) {
    return nullptr;
  }
  std::memset(p, 0, rounded);
  return static_cast<char*>(p);
}

bool allZero(const char* p, size_t n) {
  return std::all_of(p, p + n, [](char c) { return c == 0; });
}

}  // namespace

Engine::Engine(transport::Transport& transport, OutOfBand& oob, const EngineOptions& options)
    : transport_(transport), oob_(oob), options_(options) {}

Engine::~Engine() {
  close();
  for (Buffer& b : buffers_) {
    free(b.data);  // NOLINT(cppcoreguidelines-no-malloc): posix_memalign's allocation
  }
}

Engine::Link& Engine::link(int peer) noexcept {
  return links_[static_cast<size_t>(peer)];
}

char* Engine::buffer(BufferId id) const noexcept {
  return buffers_[id].data;
}

std::optional<Fault> Engine::setupFault(const char* call, int peer, Status status,
                                        uint64_t startNs) {
  return Fault::seen(call, peer, std::move(status), startNs, limits_.warningBaseline);
}

std::optional<Fault> Engine::setup(size_t maxBytes) {
  const uint64_t start = monotonicNs();
  const int n = options_.nranks;
  const int rank = options_.rank;
  if (n < 2 || rank < 0 || rank >= n) {
    return setupFault("setup", -1,
                      invalidUsage("need at least 2 ranks and 0 <= rank < nranks (rank " +
                                   std::to_string(rank) + " of " + std::to_string(n) + ")"),
                      start);
  }
  if (options_.pattern == Pattern::kPingPong && n != 2) {
    return setupFault("setup", -1, invalidUsage("pingpong runs on exactly 2 ranks"), start);
  }
  limits_.rank = rank;
  limits_.nranks = n;
  limits_.depth = std::clamp(options_.depth, 1, transport::kMaxRequests);
  limits_.warningBaseline = lastPluginWarning().sequence;
  limits_.abortFlag = &abort_;
  if (aborted()) {
    return abortedFault("setup", start);
  }

  Status st = transport_.initContext(options_.commId, transport::CommConfig{}, &ctx_);
  if (!st.ok()) {
    return setupFault("init", -1, std::move(st), start);
  }
  contextLive_ = true;
  int ndev = 0;
  st = transport_.devices(&ndev);
  if (st.ok() && (options_.device < 0 || options_.device >= ndev)) {
    st = invalidUsage("device " + std::to_string(options_.device) + " requested, the plugin has " +
                      std::to_string(ndev));
  }
  if (!st.ok()) {
    return setupFault("devices", -1, std::move(st), start);
  }
  st = transport_.properties(options_.device, &props_);
  if (!st.ok()) {
    return setupFault("getProperties", -1, std::move(st), start);
  }
  if ((props_.ptrSupport & transport::kPtrHost) == 0) {
    return setupFault("getProperties", -1,
                      invalidUsage("the plugin does not support host memory (NCCL_PTR_HOST)"),
                      start);
  }
  limits_.maxPieces = std::clamp(std::min(options_.multiRecv, props_.maxRecvs), 1, kMaxPieces);
  limits_.forceFlush = props_.forceFlush != 0;
  chunk_ = std::max<size_t>(options_.chunkBytes / sizeof(float) * sizeof(float), sizeof(float));
  if (props_.maxP2pBytes > 0) {
    chunk_ = std::min(chunk_, std::max<size_t>(props_.maxP2pBytes / 4 * 4, 4));
  }

  links_.assign(static_cast<size_t>(n), Link{});
  if (options_.pattern == Pattern::kAllToAll) {
    for (int p = 0; p < n; ++p) {
      link(p).sends = link(p).recvs = p != rank;
    }
  } else {
    link(next()).sends = true;
    link(prev()).recvs = true;
  }

  // Listen once per peer we receive from. Our blob holds one entry per such
  // peer: its rank (u32, little endian) and the handle it connects to, so a
  // ring exchanges one entry per rank (not one slot per rank in the world:
  // that grew with the square of the ranks through the rendezvous).
  constexpr size_t kEntryBytes = 4 + transport::kHandleSize;
  std::string blob;
  for (int p = 0; p < n; ++p) {
    if (!link(p).recvs) {
      continue;
    }
    std::array<uint8_t, kEntryBytes> entry{};
    putU32(entry.data(), static_cast<uint32_t>(p));
    st = transport_.listen(ctx_, options_.device, entry.data() + 4, &link(p).listenComm);
    if (!st.ok()) {
      return setupFault("listen", p, std::move(st), start);
    }
    blob.append(reinterpret_cast<const char*>(entry.data()), entry.size());
  }
  Result<std::vector<std::string>> all = oob_.allGather(blob);
  if (!all.ok()) {
    return setupFault("exchange of handles (out of band)", -1, all.status(), start);
  }
  for (int p = 0; p < n; ++p) {
    if (!link(p).sends) {
      continue;
    }
    const std::string& theirs = (*all)[static_cast<size_t>(p)];
    if (theirs.size() % kEntryBytes != 0) {
      return setupFault("exchange of handles (out of band)", p,
                        invalidUsage("rank " + std::to_string(p) + " sent " +
                                     std::to_string(theirs.size()) +
                                     " handle bytes, not a whole number of entries"),
                        start);
    }
    const uint8_t* found = nullptr;
    for (size_t at = 0; at < theirs.size(); at += kEntryBytes) {
      const auto* entry = reinterpret_cast<const uint8_t*>(theirs.data()) + at;
      if (getU32(entry) == static_cast<uint32_t>(rank)) {
        found = entry + 4;
        break;
      }
    }
    if (found == nullptr || allZero(reinterpret_cast<const char*>(found), transport::kHandleSize)) {
      return setupFault("exchange of handles (out of band)", p,
                        invalidUsage("rank " + std::to_string(p) + " published no handle for us"),
                        start);
    }
    std::memcpy(link(p).connectHandle.data(), found, transport::kHandleSize);
  }
  if (auto fault = connectAll(start)) {
    return fault;
  }

  maxBytes_ = maxBytes;
  buffers_.resize(kBufferCount);
  buffers_[kInput] = {allocate(maxBytes), maxBytes};
  buffers_[kOutput] = {allocate(maxBytes), maxBytes};
  const size_t staging =
      options_.pattern == Pattern::kAllReduce ? static_cast<size_t>(limits_.depth) * chunk_ : 0;
  buffers_[kStaging] = {allocate(staging), staging};
  for (const Buffer& b : buffers_) {
    if (b.data == nullptr) {
      return setupFault("setup", -1, systemError("cannot allocate the host buffers", ENOMEM),
                        start);
    }
  }
  return registerBuffers(start);
}

std::optional<Fault> Engine::connectAll(uint64_t startNs) {
  const uint64_t deadline = startNs + static_cast<uint64_t>(options_.timeoutMs) * 1000000ull;
  for (uint64_t pass = 0;; ++pass) {
    if (aborted()) {
      return abortedFault("connect/accept", startNs);
    }
    bool pending = false;
    for (int p = 0; p < options_.nranks; ++p) {
      Link& l = link(p);
      if (l.sends && l.sendComm == nullptr) {
        Status st = transport_.connect(ctx_, options_.device, l.connectHandle.data(), &l.sendComm);
        if (!st.ok()) {
          return setupFault("connect", p, std::move(st), startNs);
        }
        pending = pending || l.sendComm == nullptr;
      }
      if (l.recvs && l.recvComm == nullptr) {
        Status st = transport_.accept(l.listenComm, &l.recvComm);
        if (!st.ok()) {
          return setupFault("accept", p, std::move(st), startNs);
        }
        if (l.recvComm != nullptr) {
          (void)transport_.closeListen(l.listenComm);  // one connection per listen
          l.listenComm = nullptr;
        }
        pending = pending || l.recvComm == nullptr;
      }
    }
    if (!pending) {
      return std::nullopt;
    }
    if ((pass & 15) == 0 && monotonicNs() > deadline) {
      std::string waiting;
      int blamed = -1;
      for (int p = 0; p < options_.nranks; ++p) {
        const Link& l = link(p);
        if (l.sends && l.sendComm == nullptr) {
          waiting +=
              (waiting.empty() ? "" : ", ") + std::string("connect to rank ") + std::to_string(p);
          blamed = blamed < 0 ? p : blamed;
        }
        if (l.recvs && l.recvComm == nullptr) {
          waiting +=
              (waiting.empty() ? "" : ", ") + std::string("accept from rank ") + std::to_string(p);
          blamed = blamed < 0 ? p : blamed;
        }
      }
      auto fault = setupFault(
          "connect/accept", blamed,
          timeoutError("connections not established within " + std::to_string(options_.timeoutMs) +
                       " ms; waiting on: " + waiting),
          startNs);
      fault->timedOut = true;
      return fault;
    }
    sched_yield();
  }
}

std::optional<Fault> Engine::registerBuffers(uint64_t startNs) {
  for (int p = 0; p < options_.nranks; ++p) {
    Link& l = link(p);
    for (int b = 0; b < kBufferCount; ++b) {
      const Buffer& buf = buffers_[static_cast<size_t>(b)];
      if (buf.bytes == 0) {
        continue;
      }
      if (l.sendComm != nullptr && b != kStaging) {
        Status st = transport_.regMr(l.sendComm, buf.data, buf.bytes, transport::kPtrHost,
                                     &l.sendMh[static_cast<size_t>(b)]);
        if (!st.ok()) {
          return setupFault("regMr", p, std::move(st), startNs);
        }
        l.sendRegistered[static_cast<size_t>(b)] = true;
      }
      if (l.recvComm != nullptr && b != kInput) {
        Status st = transport_.regMr(l.recvComm, buf.data, buf.bytes, transport::kPtrHost,
                                     &l.recvMh[static_cast<size_t>(b)]);
        if (!st.ok()) {
          return setupFault("regMr", p, std::move(st), startNs);
        }
        l.recvRegistered[static_cast<size_t>(b)] = true;
      }
    }
  }
  return std::nullopt;
}

void Engine::close() noexcept {
  for (Link& l : links_) {
    for (size_t b = 0; b < kBufferCount; ++b) {
      if (l.sendRegistered[b]) {
        (void)transport_.deregMr(l.sendComm, l.sendMh[b]);
        l.sendRegistered[b] = false;
      }
      if (l.recvRegistered[b]) {
        (void)transport_.deregMr(l.recvComm, l.recvMh[b]);
        l.recvRegistered[b] = false;
      }
    }
    if (l.sendComm != nullptr) {
      (void)transport_.closeSend(l.sendComm);
      l.sendComm = nullptr;
    }
    if (l.recvComm != nullptr) {
      (void)transport_.closeRecv(l.recvComm);
      l.recvComm = nullptr;
    }
    if (l.listenComm != nullptr) {
      (void)transport_.closeListen(l.listenComm);
      l.listenComm = nullptr;
    }
  }
  if (contextLive_) {
    (void)transport_.finalizeContext(ctx_);
    contextLive_ = false;
    ctx_ = nullptr;
  }
}

int Engine::pieces(char* data, size_t bytes, size_t unit, void* mhandle,
                   Piece* out) const noexcept {
  return splitPieces(data, bytes, unit, options_.minPieceBytes, limits_.maxPieces, mhandle, out);
}

std::optional<Fault> Engine::meet(bool barrier, uint64_t* startNs) {
  if (barrier) {
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

std::optional<Fault> Engine::drive(Stream* const* streams, size_t count, uint64_t startNs,
                                   uint64_t* errors) {
  Pipeline pipeline(transport_, limits_);
  const uint64_t deadline = startNs + static_cast<uint64_t>(options_.timeoutMs) * 1000000ull;
  return pipeline.drive(streams, count, startNs, deadline, errors);
}

std::optional<Fault> Engine::drive(std::initializer_list<Stream*> streams, uint64_t startNs,
                                   uint64_t* errors) {
  return drive(streams.begin(), streams.size(), startNs, errors);
}

IterationResult Engine::run(size_t bytes, uint64_t iteration, bool barrier) {
  IterationResult out;
  bytes = std::min(effectiveBytes(options_.pattern, options_.nranks, bytes), maxBytes_);
  switch (options_.pattern) {
    case Pattern::kPingPong: out = runPingPong(bytes, iteration); break;
    case Pattern::kSendRecv: out = runSendRecv(bytes, iteration, barrier); break;
    case Pattern::kAllReduce: out = runAllReduce(bytes, iteration, barrier); break;
    case Pattern::kAllToAll: out = runAllToAll(bytes, iteration, barrier); break;
  }
  if (out.fault) {
    out.fault->bytes = bytes;
    out.fault->iteration = iteration;
  }
  return out;
}

IterationResult Engine::runPingPong(size_t bytes, uint64_t iteration) {
  IterationResult out;
  const int rank = options_.rank;
  const int peer = 1 - rank;
  Link& l = link(peer);
  char* in = buffer(kInput);
  char* outBuf = buffer(kOutput);
  const size_t items = std::max<size_t>(1, (bytes + chunk_ - 1) / chunk_);
  auto chunkOf = [&](char* base, void* mh, size_t item, Piece* p) {
    const ElementRange r = splitRange({0, bytes}, items, item);
    return pieces(base + r.offset, r.count, 1, mh, p);
  };
  auto zeroBytes = [](char* base, void* mh) {
    return [base, mh](size_t, Piece* p) {
      p[0] = Piece{base, 0, mh};
      return 1;
    };
  };
  uint64_t sizeErrors = 0;
  // Rank 1 announces it is in the loop with an empty message; rank 0 starts
  // its clock only then, so that the time is the round trip alone.
  if (rank == 0) {
    fillPattern(in, bytes, streamSeed(0, 1, iteration));
    Stream ready(Stream::Direction::kRecv, l.recvComm, peer, 1);
    ready.describe = zeroBytes(outBuf, l.recvMh[kOutput]);
    const uint64_t readyStart = monotonicNs();
    if ((out.fault = drive({&ready}, readyStart, &sizeErrors))) {
      return out;
    }
    const uint64_t start = monotonicNs();
    Stream pong(Stream::Direction::kRecv, l.recvComm, peer, items);
    pong.describe = [&](size_t item, Piece* p) {
      return chunkOf(outBuf, l.recvMh[kOutput], item, p);
    };
    Stream ping(Stream::Direction::kSend, l.sendComm, peer, items);
    ping.describe = [&](size_t item, Piece* p) { return chunkOf(in, l.sendMh[kInput], item, p); };
    out.fault = drive({&pong, &ping}, start, &sizeErrors);
    out.seconds = static_cast<double>(monotonicNs() - start) / 2e9;
    if (!out.fault) {
      out.errors = sizeErrors + countPatternErrors(outBuf, bytes, streamSeed(1, 0, iteration));
    }
    return out;
  }
  fillPattern(in, bytes, streamSeed(1, 0, iteration));
  const uint64_t start = monotonicNs();
  Stream ping(Stream::Direction::kRecv, l.recvComm, peer, items);
  ping.describe = [&](size_t item, Piece* p) {
    return chunkOf(outBuf, l.recvMh[kOutput], item, p);
  };
  Stream ready(Stream::Direction::kSend, l.sendComm, peer, 1);
  ready.describe = zeroBytes(in, l.sendMh[kInput]);
  ready.ready = [&](size_t) { return ping.posted() > 0; };
  if ((out.fault = drive({&ping, &ready}, start, &sizeErrors))) {
    return out;
  }
  Stream pong(Stream::Direction::kSend, l.sendComm, peer, items);
  pong.describe = [&](size_t item, Piece* p) { return chunkOf(in, l.sendMh[kInput], item, p); };
  if ((out.fault = drive({&pong}, start, &sizeErrors))) {
    return out;
  }
  out.errors = sizeErrors + countPatternErrors(outBuf, bytes, streamSeed(0, 1, iteration));
  return out;
}

IterationResult Engine::runSendRecv(size_t bytes, uint64_t iteration, bool barrier) {
  IterationResult out;
  const int rank = options_.rank;
  char* in = buffer(kInput);
  char* outBuf = buffer(kOutput);
  fillPattern(in, bytes, streamSeed(rank, next(), iteration));
  uint64_t start = 0;
  if ((out.fault = meet(barrier, &start))) {
    return out;
  }
  const size_t items = std::max<size_t>(1, (bytes + chunk_ - 1) / chunk_);
  Link& to = link(next());
  Link& from = link(prev());
  Stream send(Stream::Direction::kSend, to.sendComm, next(), items);
  send.describe = [&](size_t item, Piece* p) {
    const ElementRange r = splitRange({0, bytes}, items, item);
    return pieces(in + r.offset, r.count, 1, to.sendMh[kInput], p);
  };
  Stream recv(Stream::Direction::kRecv, from.recvComm, prev(), items);
  recv.describe = [&](size_t item, Piece* p) {
    const ElementRange r = splitRange({0, bytes}, items, item);
    return pieces(outBuf + r.offset, r.count, 1, from.recvMh[kOutput], p);
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

IterationResult Engine::runAllReduce(size_t bytes, uint64_t iteration, bool barrier) {
  IterationResult out;
  const size_t count = bytes / sizeof(float);
  const auto* in = reinterpret_cast<const float*>(buffer(kInput));
  auto* acc = reinterpret_cast<float*>(buffer(kOutput));
  fillReduceInput(reinterpret_cast<float*>(buffer(kInput)), count, options_.rank, iteration);
  uint64_t start = 0;
  if ((out.fault = meet(barrier, &start))) {
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

std::optional<Fault> Engine::ringAllReduce(size_t count, uint64_t startNs, uint64_t* sizeErrors) {
  auto* acc = reinterpret_cast<float*>(buffer(kOutput));
  char* staging = buffer(kStaging);
  const RingSchedule ring(options_.nranks, options_.rank, count, chunk_ / sizeof(float));
  const size_t depth = static_cast<size_t>(limits_.depth);
  Link& to = link(next());
  Link& from = link(prev());
  auto stagingSlot = [&](size_t item) { return staging + (item % depth) * chunk_; };

  Stream send(Stream::Direction::kSend, to.sendComm, next(), ring.items());
  Stream recv(Stream::Direction::kRecv, from.recvComm, prev(), ring.items());
  send.describe = [&](size_t item, Piece* p) {
    const ElementRange r = ring.sendChunk(item);
    return pieces(reinterpret_cast<char*>(acc + r.offset), r.count * sizeof(float), sizeof(float),
                  to.sendMh[kOutput], p);
  };
  send.ready = [&](size_t item) { return recv.done() >= ring.recvsBeforeSend(item); };
  recv.describe = [&](size_t item, Piece* p) {
    const ElementRange r = ring.recvChunk(item);
    if (ring.isReduce(item)) {
      return pieces(stagingSlot(item), r.count * sizeof(float), sizeof(float),
                    from.recvMh[kStaging], p);
    }
    return pieces(reinterpret_cast<char*>(acc + r.offset), r.count * sizeof(float), sizeof(float),
                  from.recvMh[kOutput], p);
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
  char* data = buffer(kOutput);
  const size_t items = std::max<size_t>(1, (bytes + chunk_ - 1) / chunk_);
  const bool receives = options_.rank != root;
  const bool sends = next() != root;
  Link& to = link(next());
  Link& from = link(prev());
  Stream recv(Stream::Direction::kRecv, from.recvComm, prev(), receives ? items : 0);
  recv.describe = [&](size_t item, Piece* p) {
    const ElementRange r = splitRange({0, bytes}, items, item);
    return pieces(data + r.offset, r.count, 1, from.recvMh[kOutput], p);
  };
  Stream send(Stream::Direction::kSend, to.sendComm, next(), sends ? items : 0);
  send.describe = [&](size_t item, Piece* p) {
    const ElementRange r = splitRange({0, bytes}, items, item);
    return pieces(data + r.offset, r.count, 1, to.sendMh[kOutput], p);
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
    return Fault::seen(call, -1,
                       invalidUsage("the engine is not set up for user data (needs the "
                                    "all-reduce pattern and buffers of at least 4 bytes)"),
                       startNs, limits_.warningBaseline);
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
  return std::nullopt;
}

std::optional<Fault> Engine::broadcast(void* data, size_t bytes, int root) {
  const uint64_t start = monotonicNs();
  if (auto fault = userOperationFault("broadcast", start)) {
    return fault;
  }
  if (root < 0 || root >= options_.nranks) {
    return Fault::seen("broadcast", -1,
                       invalidUsage("root " + std::to_string(root) + " outside 0.." +
                                    std::to_string(options_.nranks - 1)),
                       start, limits_.warningBaseline);
  }
  auto* user = static_cast<char*>(data);
  char* staged = buffer(kOutput);
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
  return std::nullopt;
}

std::optional<Fault> Engine::barrier() {
  const uint64_t start = monotonicNs();
  if (auto fault = userOperationFault("barrier", start)) {
    return fault;
  }
  uint64_t sizeErrors = 0;
  if (auto fault = ringAllReduce(0, start, &sizeErrors)) {
    return fault;
  }
  if (sizeErrors != 0) {
    return sizeFault("barrier", sizeErrors, start);
  }
  return std::nullopt;
}

IterationResult Engine::runAllToAll(size_t bytes, uint64_t iteration, bool barrier) {
  IterationResult out;
  const int rank = options_.rank;
  const int n = options_.nranks;
  const size_t block = bytes / static_cast<size_t>(n);
  char* in = buffer(kInput);
  char* outBuf = buffer(kOutput);
  for (int p = 0; p < n; ++p) {
    fillPattern(in + static_cast<size_t>(p) * block, block, streamSeed(rank, p, iteration));
  }
  uint64_t start = 0;
  if ((out.fault = meet(barrier, &start))) {
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
    char* src = in + static_cast<size_t>(p) * block;
    char* dst = outBuf + static_cast<size_t>(q) * block;
    auto recv = std::make_unique<Stream>(Stream::Direction::kRecv, from.recvComm, q, items);
    recv->describe = [this, dst, block, items, &from](size_t item, Piece* pc) {
      const ElementRange r = splitRange({0, block}, items, item);
      return pieces(dst + r.offset, r.count, 1, from.recvMh[kOutput], pc);
    };
    auto send = std::make_unique<Stream>(Stream::Direction::kSend, to.sendComm, p, items);
    send->describe = [this, src, block, items, &to](size_t item, Piece* pc) {
      const ElementRange r = splitRange({0, block}, items, item);
      return pieces(src + r.offset, r.count, 1, to.sendMh[kInput], pc);
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
