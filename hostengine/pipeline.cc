#include "hostengine/pipeline.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <iterator>
#include <limits>

#include "common/clock.h"
#include "hostengine/plugin_log.h"

namespace resilient::hostengine {
namespace {

constexpr int kSizeNotReported = std::numeric_limits<int>::min();

// Passes without any request posted or completed before the loop yields the CPU.
constexpr uint64_t kSpinPasses = 256;

}  // namespace

int messageTag(int senderRank, int nranks, int piece) noexcept {
  return senderRank + piece * nranks;
}

int splitPieces(const Piece& whole, const SplitOptions& options, Piece* out) noexcept {
  const size_t bytes = whole.bytes;
  const size_t unit = std::max<size_t>(options.unit, 1);
  const size_t units = bytes / unit;
  const size_t byMin = options.minPieceBytes > 0 ? bytes / options.minPieceBytes : units;
  size_t n = std::clamp<size_t>(byMin, 1,
                                static_cast<size_t>(std::clamp(options.maxPieces, 1, kMaxPieces)));
  n = std::min(n, std::max<size_t>(units, 1));
  size_t at = 0;
  for (size_t i = 0; i < n; ++i) {
    // Whole units, the first (units % n) pieces one unit longer; the last
    // piece also takes the bytes after the last whole unit.
    size_t length = (units / n + (i < units % n ? 1 : 0)) * unit;
    if (i + 1 == n) {
      length = bytes - at;
    }
    out[i] = Piece{whole.data + at, length, whole.region};
    at += length;
  }
  return static_cast<int>(n);
}

Fault Fault::seen(FaultSighting sighting) {
  Fault f;
  f.call = sighting.call;
  f.peer = sighting.peer;
  f.status = std::move(sighting.status);
  f.detectedNs = monotonicNs();
  f.sinceStartMs = static_cast<double>(f.detectedNs - sighting.startNs) / 1e6;
  const PluginWarning w = lastPluginWarning();
  if (w.sequence > sighting.warningBaseline) {
    f.pluginWarning = w.text;
  }
  return f;
}

Fault abortedFault(const char* call, uint64_t startNs) {
  Fault f;
  f.call = call;
  f.status = systemError("aborted by its owner while in flight", ECANCELED);
  f.aborted = true;
  f.detectedNs = monotonicNs();
  f.sinceStartMs = static_cast<double>(f.detectedNs - startNs) / 1e6;
  return f;
}

std::string Fault::describe() const {
  char when[64];
  std::snprintf(when, sizeof(when), "%.3f ms", sinceStartMs);
  std::string text = call;
  if (peer >= 0) {
    const bool from = call.find("irecv") != std::string::npos || call == "accept";
    text += std::string(from ? " from rank " : " to rank ") + std::to_string(peer);
  }
  text += std::string(" after ") + when + ": " + status.toString();
  if (!pluginWarning.empty()) {
    text += " [plugin: " + pluginWarning + "]";
  }
  return text;
}

Stream::Stream(transport::SendComm* comm, int peer, size_t items) noexcept
    : direction_(Direction::kSend), sendComm_(comm), peer_(peer), items_(items) {}

Stream::Stream(transport::RecvComm* comm, int peer, size_t items) noexcept
    : direction_(Direction::kRecv), recvComm_(comm), peer_(peer), items_(items) {}

Status Pipeline::postSends(Stream& s) {
  const size_t window = static_cast<size_t>(limits_.depth) * static_cast<size_t>(limits_.maxPieces);
  while (s.posted_ < s.items_ && (!s.ready || s.ready(s.posted_))) {
    if (s.piecesPosted_ == 0) {
      s.piecesOfItem_ = s.describe(s.posted_, s.pieces_.data());
    }
    while (s.piecesPosted_ < s.piecesOfItem_) {
      if (s.outstanding() >= window) {
        return {};
      }
      const Piece& p = s.pieces_[static_cast<size_t>(s.piecesPosted_)];
      transport::Request* request = nullptr;
      Status st = s.sendComm_->isend(p.data, p.bytes,
                                     messageTag(limits_.rank, limits_.nranks, s.piecesPosted_),
                                     p.region, nullptr, &request);
      if (!st.ok()) {
        failedCall_ = "isend";
        return st;
      }
      if (request == nullptr) {
        return {};  // the plugin cannot take it now: retry on the next pass
      }
      Stream::Outstanding& o = s.ring_[s.tail_ % kMaxOutstanding];
      o.request = request;
      o.item = s.posted_;
      o.piece = s.piecesPosted_;
      o.pieces = s.piecesOfItem_;
      ++s.tail_;
      ++s.piecesPosted_;
    }
    s.piecesPosted_ = 0;
    ++s.posted_;
  }
  return {};
}

Status Pipeline::postRecvs(Stream& s) {
  const size_t window = static_cast<size_t>(limits_.depth);
  while (s.posted_ < s.items_ && s.outstanding() < window && (!s.ready || s.ready(s.posted_))) {
    const int n = s.describe(s.posted_, s.pieces_.data());
    std::byte* data[kMaxPieces];
    size_t sizes[kMaxPieces];
    int tags[kMaxPieces];
    transport::MemoryRegion* regions[kMaxPieces];
    for (int i = 0; i < n; ++i) {
      const Piece& p = s.pieces_[static_cast<size_t>(i)];
      data[i] = p.data;
      sizes[i] = p.bytes;
      tags[i] = messageTag(s.peer_, limits_.nranks, i);
      regions[i] = p.region;
    }
    transport::Request* request = nullptr;
    Status st = s.recvComm_->irecv(n, data, sizes, tags, regions, nullptr, &request);
    if (!st.ok()) {
      failedCall_ = "irecv";
      return st;
    }
    if (request == nullptr) {
      return {};
    }
    Stream::Outstanding& o = s.ring_[s.tail_ % kMaxOutstanding];
    o.request = request;
    o.item = s.posted_;
    o.piece = 0;
    o.pieces = n;
    for (int i = 0; i < n; ++i) {
      o.expect[static_cast<size_t>(i)] = sizes[i];
      o.where[static_cast<size_t>(i)] = s.pieces_[static_cast<size_t>(i)];
    }
    ++s.tail_;
    ++s.posted_;
  }
  return {};
}

Status Pipeline::testOldest(Stream& s, uint64_t* sizeErrors) {
  const bool send = s.direction_ == Stream::Direction::kSend;
  while (s.head_ < s.tail_) {
    Stream::Outstanding& o = s.ring_[s.head_ % kMaxOutstanding];
    int done = 0;
    // A sentinel no plugin writes: what test() leaves untouched, it did not report.
    int sizes[kMaxPieces];
    std::fill(std::begin(sizes), std::end(sizes), kSizeNotReported);
    Status st = o.request->test(&done, sizes);
    if (!st.ok()) {
      failedCall_ = send ? "test(isend)" : "test(irecv)";
      return st;
    }
    if (done == 0) {
      return {};
    }
    ++s.head_;
    if (send) {
      if (o.piece + 1 == o.pieces) {
        if (s.completed) {
          s.completed(o.item);
        }
        ++s.done_;
      }
      continue;
    }
    for (int i = 0; i < o.pieces; ++i) {
      const size_t want = o.expect[static_cast<size_t>(i)];
      if (sizes[i] == kSizeNotReported) {
        // Tolerated, as NCCL does: the posted size stands (the flush below too).
        sizes[i] = static_cast<int>(want);
        if (limits_.notes != nullptr) {
          limits_.notes->sizesNotReported.fetch_add(1, std::memory_order_relaxed);
        }
      } else if (sizes[i] < 0 || static_cast<size_t>(sizes[i]) != want) {
        *sizeErrors += std::max<size_t>(want, 1);
      }
    }
    if (limits_.forceFlush) {
      RESILIENT_TRY(flush(s, o, sizes));
    }
    if (s.completed) {
      s.completed(o.item);
    }
    ++s.done_;
    if (consumes_) {
      // As NCCL: once the data was used, the completed request goes back.
      Status consumed = s.recvComm_->irecvConsumed(o.pieces, o.request);
      if (!consumed.ok()) {
        failedCall_ = "irecvConsumed";
        return consumed;
      }
    }
  }
  return {};
}

Status Pipeline::flush(Stream& s, const Stream::Outstanding& o, const int* sizes) {
  std::byte* data[kMaxPieces];
  transport::MemoryRegion* regions[kMaxPieces];
  for (int i = 0; i < o.pieces; ++i) {
    data[i] = o.where[static_cast<size_t>(i)].data;
    regions[i] = o.where[static_cast<size_t>(i)].region;
  }
  transport::Request* request = nullptr;
  Status st = s.recvComm_->iflush(o.pieces, data, sizes, regions, &request);
  // A flush is local: poll it to the end (nullptr: nothing to wait for).
  int done = request == nullptr ? 1 : 0;
  while (st.ok() && done == 0) {
    st = request->test(&done, nullptr);
    if (st.ok() && done == 0 && monotonicNs() > deadlineNs_) {
      st = timeoutError("iflush did not complete before the deadline");
    }
  }
  if (!st.ok()) {
    failedCall_ = done == 0 && request != nullptr ? "test(iflush)" : "iflush";
  }
  return st;
}

std::optional<Fault> Pipeline::drive(Stream* const* streams, size_t count, uint64_t startNs,
                                     uint64_t deadlineNs, uint64_t* sizeErrors) {
  deadlineNs_ = deadlineNs;
  // A timeout quotes only a WARN logged during this operation: an older one
  // (another connection, an earlier phase) would explain nothing of it.
  const uint64_t operationBaseline = lastPluginWarning().sequence;
  uint64_t idlePasses = 0;
  for (uint64_t pass = 0;; ++pass) {
    if (limits_.abortFlag != nullptr && limits_.abortFlag->load(std::memory_order_relaxed)) {
      return abortedFault("operation", startNs);
    }
    bool all = true;
    bool moved = false;
    for (size_t i = 0; i < count; ++i) {
      Stream& s = *streams[i];
      if (s.finished()) {
        continue;
      }
      all = false;
      const size_t before = s.tail_ + s.head_;
      Status st = s.direction_ == Stream::Direction::kSend ? postSends(s) : postRecvs(s);
      if (st.ok()) {
        st = testOldest(s, sizeErrors);
      }
      if (!st.ok()) {
        return Fault::seen({.call = failedCall_,
                            .peer = s.peer(),
                            .status = std::move(st),
                            .startNs = startNs,
                            .warningBaseline = limits_.warningBaseline});
      }
      moved = moved || s.tail_ + s.head_ != before;
    }
    if (all) {
      return std::nullopt;
    }
    // Spin while requests move; once they stop, let other runnable threads
    // (the plugin's helpers, other ranks on an oversubscribed host) run.
    idlePasses = moved ? 0 : idlePasses + 1;
    if (idlePasses > kSpinPasses) {
      sched_yield();
    }
    if ((pass & 63) == 0 && monotonicNs() > deadlineNs) {
      // Blame the first unfinished receive (data that does not arrive), else the first send.
      const Stream* blamed = nullptr;
      std::string waiting;
      for (size_t i = 0; i < count; ++i) {
        const Stream& s = *streams[i];
        if (s.finished()) {
          continue;
        }
        const bool recv = s.direction() == Stream::Direction::kRecv;
        if (blamed == nullptr || (recv && blamed->direction() == Stream::Direction::kSend)) {
          blamed = &s;
        }
        waiting += (waiting.empty() ? "" : ", ") +
                   std::string(recv ? "irecv from rank " : "isend to rank ") +
                   std::to_string(s.peer()) + " (" + std::to_string(s.done()) + "/" +
                   std::to_string(s.items()) + " done, " + std::to_string(s.posted()) + " posted)";
      }
      const double ms = static_cast<double>(deadlineNs - startNs) / 1e6;
      char limit[32];
      std::snprintf(limit, sizeof(limit), "%.0f", ms);
      const bool recv = blamed->direction() == Stream::Direction::kRecv;
      Fault f = Fault::seen(
          {.call = recv ? "test(irecv)" : "test(isend)",
           .peer = blamed->peer(),
           .status = timeoutError(std::string("no completion within ") + limit +
                                  " ms (not detected by the transport); waiting on: " + waiting),
           .startNs = startNs,
           .warningBaseline = std::max(limits_.warningBaseline, operationBaseline)});
      f.timedOut = true;
      return f;
    }
  }
}

}  // namespace resilient::hostengine
