// The Engine's lifecycle and setup: the plugin context, the connections
// (listen, handles exchanged out of band, connect/accept polled together),
// the registered host buffers, close; and the pipeline every operation
// drives. As in NCCL, listen, connect, accept and regMr run on a service
// thread, never on the thread that runs the data path; the profiler's init
// follows the net plugin's, its finalize comes after the connections closed.
// run()'s patterns are in engine_patterns.cc, the ring operations in
// engine_ring.cc.
#include "hostengine/engine.h"

#include <sched.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <system_error>
#include <thread>

#include "common/clock.h"
#include "common/little_endian.h"
#include "common/log.h"
#include "hostengine/data.h"
#include "hostengine/engine_internal.h"
#include "hostengine/plugin_log.h"

namespace resilient::hostengine {

namespace {

bool allZero(const char* p, size_t n) {
  return std::all_of(p, p + n, [](char c) { return c == 0; });
}

}  // namespace

Engine::Engine(transport::Transport& transport, OutOfBand& oob, const EngineOptions& options)
    : transport_(transport), oob_(oob), options_(options) {}

Engine::~Engine() {
  close();
}

Engine::Link& Engine::link(int peer) noexcept {
  return links_[static_cast<size_t>(peer)];
}

std::byte* Engine::buffer(BufferId id) const noexcept {
  return buffers_[id].memory.data();
}

std::optional<Fault> Engine::setupFault(const char* call, int peer, Status status,
                                        uint64_t startNs) {
  return Fault::seen({.call = call,
                      .peer = peer,
                      .status = std::move(status),
                      .startNs = startNs,
                      .warningBaseline = limits_.warningBaseline});
}

std::optional<Fault> Engine::setup(size_t maxBytes) {
  const uint64_t start = monotonicNs();
  if (auto fault = checkRanks(start)) {
    return fault;
  }
  if (aborted()) {
    return abortedFault("setup", start);
  }
  if (auto fault = openDevice(start)) {
    return fault;
  }
  planLinks();
  std::string blob;
  if (auto fault = onServiceThread(start, [&] { return listenAll(start, &blob); })) {
    return fault;
  }
  std::vector<std::string> handles;  // by rank: theirs, where we connect to them
  if (options_.pattern == Pattern::kAllToAll) {
    Result<std::vector<std::string>> all = oob_.allGather(blob);
    if (!all.ok()) {
      return setupFault("exchange of handles (out of band)", -1, all.status(), start);
    }
    handles = std::move(all).value();
  } else {
    // The ring: only the next rank's handles matter to us.
    Result<std::string> theirs = oob_.exchangeWith(next(), blob);
    if (!theirs.ok()) {
      return setupFault("exchange of handles (out of band)", next(), theirs.status(), start);
    }
    handles.resize(static_cast<size_t>(options_.nranks));
    handles[static_cast<size_t>(next())] = std::move(theirs).value();
  }
  if (auto fault = takeHandles(handles, start)) {
    return fault;
  }
  if (auto fault = onServiceThread(start, [&] { return connectAll(start); })) {
    return fault;
  }
  if (auto fault = allocateBuffers(maxBytes, start)) {
    return fault;
  }
  return onServiceThread(start, [&] { return registerBuffers(start); });
}

std::optional<Fault> Engine::checkRanks(uint64_t start) {
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
  limits_.notes = &notes_;
  return std::nullopt;
}

std::optional<Fault> Engine::openDevice(uint64_t start) {
  Status st = transport_.initContext(options_.commId, transport::CommConfig{}, &ctx_);
  if (!st.ok()) {
    return setupFault("init", -1, std::move(st), start);
  }
  profiler_.open(transport_, options_.profilerTable,
                 {.commId = options_.commId,
                  .name = options_.commName.c_str(),
                  .nNodes = std::max(options_.nNodes, 1),
                  .nranks = options_.nranks,
                  .rank = options_.rank});
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
  return std::nullopt;
}

void Engine::planLinks() {
  const int n = options_.nranks;
  links_.clear();  // (a Link owns its comms: not copied)
  links_.resize(static_cast<size_t>(n));
  if (options_.pattern == Pattern::kAllToAll) {
    for (int p = 0; p < n; ++p) {
      link(p).sends = link(p).recvs = p != options_.rank;
    }
  } else {
    link(next()).sends = true;
    link(prev()).recvs = true;
  }
}

// Listen once per peer we receive from. Our blob holds one entry per such
// peer: its rank (u32, little endian) and the handle it connects to, so a
// ring exchanges one entry per rank (not one slot per rank in the world:
// that grew with the square of the ranks through the rendezvous).
constexpr size_t kEntryBytes = 4 + transport::kHandleSize;

std::optional<Fault> Engine::listenAll(uint64_t start, std::string* blob) {
  for (int p = 0; p < options_.nranks; ++p) {
    if (!link(p).recvs) {
      continue;
    }
    std::array<uint8_t, kEntryBytes> entry{};
    putU32(entry.data(), static_cast<uint32_t>(p));
    Status listened =
        transport_.listen(ctx_.get(), options_.device,
                          reinterpret_cast<std::byte*>(entry.data() + 4), &link(p).listener);
    if (!listened.ok()) {
      return setupFault("listen", p, std::move(listened), start);
    }
    blob->append(reinterpret_cast<const char*>(entry.data()), entry.size());
  }
  return std::nullopt;
}

// Each peer we send to: the handle it published for us.
std::optional<Fault> Engine::takeHandles(const std::vector<std::string>& all, uint64_t start) {
  const auto rank = static_cast<uint32_t>(options_.rank);
  for (int p = 0; p < options_.nranks; ++p) {
    if (!link(p).sends) {
      continue;
    }
    const std::string& theirs = all[static_cast<size_t>(p)];
    if (theirs.size() % kEntryBytes != 0) {
      return setupFault(
          "exchange of handles (out of band)", p,
          invalidUsage("rank " + std::to_string(p) + " sent " + std::to_string(theirs.size()) +
                       " handle bytes, not a whole number of entries"),
          start);
    }
    const uint8_t* found = nullptr;
    for (size_t at = 0; at < theirs.size(); at += kEntryBytes) {
      const auto* entry = reinterpret_cast<const uint8_t*>(theirs.data()) + at;
      if (getU32(entry) == rank) {
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
  return std::nullopt;
}

std::optional<Fault> Engine::allocateBuffers(size_t maxBytes, uint64_t start) {
  maxBytes_ = maxBytes;
  buffers_.resize(kBufferCount);
  // Zero pages on first touch: an operation faults in what it moves, not
  // the whole maxBytes of every buffer of every rank at every (re)start.
  buffers_[kInput] = {HostBuffer::zeroed(maxBytes), maxBytes};
  buffers_[kOutput] = {HostBuffer::zeroed(maxBytes), maxBytes};
  const size_t staging =
      options_.pattern == Pattern::kAllReduce ? static_cast<size_t>(limits_.depth) * chunk_ : 0;
  buffers_[kStaging] = {HostBuffer::zeroed(staging), staging};
  for (const Buffer& b : buffers_) {
    if (b.memory.empty()) {
      return setupFault("setup", -1, systemError("cannot allocate the host buffers", ENOMEM),
                        start);
    }
  }
  return std::nullopt;
}

std::optional<Fault> Engine::onServiceThread(uint64_t startNs,
                                             const std::function<std::optional<Fault>()>& work) {
  std::optional<Fault> fault;
  try {
    std::thread service([&] { fault = work(); });
    service.join();
  } catch (const std::system_error& e) {
    return setupFault(
        "setup", -1,
        systemError(std::string("cannot start the service thread: ") + e.what(), e.code().value()),
        startNs);
  }
  return fault;
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
        Status st =
            transport_.connect(ctx_.get(), options_.device, l.connectHandle.data(), false,
                               &l.sendComm);
        if (!st.ok()) {
          return setupFault("connect", p, std::move(st), startNs);
        }
        pending = pending || l.sendComm == nullptr;
      }
      if (l.recvs && l.recvComm == nullptr) {
        Status st = l.listener->accept(false, &l.recvComm);
        if (!st.ok()) {
          return setupFault("accept", p, std::move(st), startNs);
        }
        if (l.recvComm != nullptr) {
          (void)l.listener->close();  // one connection per listen
          l.listener.reset();
        }
        pending = pending || l.recvComm == nullptr;
      }
    }
    if (!pending) {
      return std::nullopt;
    }
    if ((pass & 15) == 0) {
      oob_.waiting();
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
      // A peer that never reached the exchange of handles (the ring's
      // exchange waits for the next rank only) is the one to blame.
      std::string absent;
      for (int p = 0; p < options_.nranks && absent.empty(); ++p) {
        const Link& l = link(p);
        if ((l.sends && l.sendComm == nullptr) || (l.recvs && l.recvComm == nullptr)) {
          if (oob_.gaveInLastExchange(p) == std::optional<bool>(false)) {
            blamed = p;
            absent = " (rank " + std::to_string(p) +
                     " never took part in the exchange of handles; missing ranks: " +
                     std::to_string(p) + ")";
          }
        }
      }
      auto fault = setupFault(
          "connect/accept", blamed,
          timeoutError("connections not established within " + std::to_string(options_.timeoutMs) +
                       " ms; waiting on: " + waiting + absent),
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
        Status st = l.sendComm->regMr(buf.memory.data(), buf.bytes, transport::kPtrHost,
                                      &l.sendMr[static_cast<size_t>(b)]);
        if (!st.ok()) {
          return setupFault("regMr", p, std::move(st), startNs);
        }
      }
      if (l.recvComm != nullptr && b != kInput) {
        Status st = l.recvComm->regMr(buf.memory.data(), buf.bytes, transport::kPtrHost,
                                      &l.recvMr[static_cast<size_t>(b)]);
        if (!st.ok()) {
          return setupFault("regMr", p, std::move(st), startNs);
        }
      }
    }
  }
  return std::nullopt;
}

void Engine::close() noexcept {
  for (Link& l : links_) {
    // As NCCL: every region back to its comm before the comm closes.
    for (size_t b = 0; b < kBufferCount; ++b) {
      if (l.sendMr[b] != nullptr) {
        (void)l.sendComm->deregMr(std::move(l.sendMr[b]));
      }
      if (l.recvMr[b] != nullptr) {
        (void)l.recvComm->deregMr(std::move(l.recvMr[b]));
      }
    }
    if (l.sendComm != nullptr) {
      (void)l.sendComm->close();
      l.sendComm.reset();
    }
    if (l.recvComm != nullptr) {
      (void)l.recvComm->close();
      l.recvComm.reset();
    }
    if (l.listener != nullptr) {
      (void)l.listener->close();
      l.listener.reset();
    }
  }
  // As NCCL's commFree: the profiler after the connections, before the net
  // plugin's context.
  profiler_.close();
  if (ctx_ != nullptr) {
    (void)ctx_->finalize();
    ctx_.reset();
  }
}

int Engine::pieces(const Region& region, Piece* out) const noexcept {
  return splitPieces({.data = region.data, .bytes = region.bytes, .region = region.region},
                     {.unit = region.unit,
                      .minPieceBytes = options_.minPieceBytes,
                      .maxPieces = limits_.maxPieces},
                     out);
}

std::optional<Fault> Engine::drive(Stream* const* streams, size_t count, uint64_t startNs,
                                   uint64_t* errors) {
  Pipeline pipeline(transport_, limits_);
  const uint64_t deadline = startNs + static_cast<uint64_t>(options_.timeoutMs) * 1000000ull;
  std::optional<Fault> fault = pipeline.drive(streams, count, startNs, deadline, errors);
  if (!warnedSizes_ && notes_.sizesNotReported.load(std::memory_order_relaxed) > 0) {
    warnedSizes_ = true;
    RES_WARN(NCCL_NET,
             "net plugin %s: test() did not report the sizes of completed receives; "
             "NCCL tolerates this (it uses them only for GPU flushes and profiler byte counts), "
             "and so does the host engine: the posted sizes stand",
             transport_.name());
  }
  return fault;
}

std::optional<Fault> Engine::drive(std::initializer_list<Stream*> streams, uint64_t startNs,
                                   uint64_t* errors) {
  return drive(streams.begin(), streams.size(), startNs, errors);
}

}  // namespace resilient::hostengine
