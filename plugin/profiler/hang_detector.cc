#include "plugin/profiler/hang_detector.h"

#include <algorithm>
#include <bit>
#include <cinttypes>
#include <cstdio>
#include <string>

#include "plugin/profiler/comm_table.h"
#include "plugin/profiler/flight_recorder.h"
#include "plugin/profiler/names.h"

namespace resilient::profiler {
namespace {

constexpr uint64_t kMs = 1000000;

// "3, 5-7" for the set bits of `mask`.
std::string channelList(uint64_t mask) {
  std::string out;
  int c = 0;
  while (c < 64) {
    if ((mask >> c & 1u) == 0) {
      ++c;
      continue;
    }
    int end = c;
    while (end + 1 < 64 && (mask >> (end + 1) & 1u) != 0) {
      ++end;
    }
    if (!out.empty()) {
      out += ", ";
    }
    out += std::to_string(c);
    if (end > c) {
      out += "-" + std::to_string(end);
    }
    c = end + 1;
  }
  return out.empty() ? "none" : out;
}

// Channels that started and did not finish.
uint64_t stuckChannelsOf(const Context& ctx, const OpSlot& op) {
  const uint64_t started = op.channelsStarted.load(std::memory_order_relaxed);
  if (ctx.kernelEvents) {
    return started & ~op.channelsDone.load(std::memory_order_relaxed);
  }
  uint64_t open = 0;  // v1, v2: channels with proxy ops still open
  for (uint32_t c = 0; c < kMaxChannels; ++c) {
    if ((started >> c & 1u) != 0 && op.loadProxyOpen(c) != 0) {
      open |= uint64_t{1} << c;
    }
  }
  return open;
}

std::string describeOp(const OpInfo& info) {
  char buf[256];
  if (info.kind == RESILIENT_BLACKBOX_OP_COLL) {
    char channels[32] = "";  // v1-v3 give no exact channel count
    if (info.nChannels != 0) {
      std::snprintf(channels, sizeof channels, ", %u channels", info.nChannels);
    }
    std::snprintf(
        buf, sizeof buf, "%s seq %" PRIu64 " (collective #%" PRIu64 ", %" PRIu64 " bytes, %s/%s%s)",
        info.func != nullptr ? info.func : "collective", info.seqNumber, info.collIndex, info.bytes,
        info.algo != nullptr ? info.algo : "?", info.proto != nullptr ? info.proto : "?", channels);
  } else {
    std::snprintf(buf, sizeof buf, "%s peer %d (operation #%" PRIu64 ", %" PRIu64 " bytes)",
                  info.func != nullptr ? info.func : "p2p", info.rootOrPeer, info.opIndex,
                  info.bytes);
  }
  return buf;
}

}  // namespace

HangDetector::HangDetector(Tracker& tracker, uint64_t timeoutNs, FaultSink& sink)
    : tracker_(tracker), timeoutNs_(timeoutNs), sink_(sink) {}

uint64_t HangDetector::intervalNs() const noexcept {
  if (timeoutNs_ == 0) {
    return 100 * kMs;  // publishing only
  }
  return std::clamp<uint64_t>(timeoutNs_ / 20, 5 * kMs, 50 * kMs);
}

void HangDetector::scan(uint64_t nowNs) noexcept {
  std::lock_guard<std::mutex> lock(tracker_.registryMutex());
  tracker_.forEachContextLocked([&](Context& ctx) { scanContext(ctx, nowNs); });
}

void HangDetector::scanContext(Context& ctx, uint64_t now) noexcept {
  auto& w = ctx.watch;
  const uint64_t progress = ctx.progress.load(std::memory_order_relaxed);
  if (!w.seen || progress != w.progress) {
    w.seen = true;
    w.progress = progress;
    w.changedNs = now;
    w.silenceReported = false;
  }

  uint64_t inFlight = 0;
  bool covered = false;  // an operation in flight was reported already
  OpSlot* oldest = nullptr;
  OpInfo oldestInfo;
  OpSlot* hung = nullptr;  // the oldest newly hung operation
  OpInfo hungInfo;
  OpSlot* waiting = nullptr;  // the oldest enqueued operation that never started
  OpInfo waitingInfo;
  // Slots past the highest ever used were never live (a slot taken since
  // this load is seen at the next scan, as one whose generation we read just
  // before it was set).
  const uint32_t used = std::min(ctx.capacity, ctx.slotsUsed.load(std::memory_order_acquire));
  for (uint32_t i = 0; i < used; ++i) {
    OpSlot& op = ctx.slots[i];
    const uint32_t generation = op.generation.load(std::memory_order_acquire);
    if (generation == 0) {
      continue;
    }
    const uint32_t flags = op.flags.load(std::memory_order_acquire);
    const OpInfo info = op.loadInfo();
    const uint64_t opProgress = op.progress.load(std::memory_order_relaxed);
    if ((flags & (opflag::kComplete | opflag::kReleased)) != 0 ||
        op.generation.load(std::memory_order_acquire) != generation) {
      continue;  // finished, or released and reused while we looked
    }
    auto& ow = op.watch;
    if (ow.generation != generation) {
      ow = OpSlot::Watch{generation, false, opProgress, now};
    } else if (opProgress != ow.progress) {
      ow.progress = opProgress;
      ow.changedNs = now;
    }
    ++inFlight;
    if (oldest == nullptr || info.opIndex < oldestInfo.opIndex) {
      oldest = &op;
      oldestInfo = info;
    }
    if ((flags & opflag::kStarted) != 0) {
      if (ow.reported) {
        covered = true;
      } else if (timeoutNs_ != 0 && now - ow.changedNs >= timeoutNs_) {
        ow.reported = true;  // reported below if the oldest; covered by that report otherwise
        if (hung == nullptr || info.opIndex < hungInfo.opIndex) {
          hung = &op;
          hungInfo = info;
        }
      }
    } else if ((flags & opflag::kEnqueued) != 0) {
      if (!ctx.kernelEvents && (flags & opflag::kChildSeen) == 0 &&
          now - ow.changedNs >= kChildlessRetireNs && tracker_.retireChildless(ctx, op, i)) {
        --inFlight;
        if (oldest == &op) {
          oldest = nullptr;  // found again on the next scan if another one is older
        }
        continue;
      }
      if (waiting == nullptr || info.opIndex < waitingInfo.opIndex) {
        waiting = &op;
        waitingInfo = info;
      }
    }
  }

  const uint64_t commSilentNs = now - w.changedNs;
  if (hung != nullptr) {
    report(ctx, RESILIENT_BLACKBOX_FAULT_COLL_HUNG, *hung, hungInfo,
           {.stuckChannels = stuckChannelsOf(ctx, *hung),
            .stalledNs = now - hung->watch.changedNs,
            .commSilentNs = commSilentNs,
            .nowNs = now});
  } else if (timeoutNs_ != 0 && ctx.kernelEvents && !covered && waiting != nullptr &&
             !w.silenceReported && commSilentNs >= timeoutNs_ &&
             now - waiting->watch.changedNs >= timeoutNs_) {
    w.silenceReported = true;
    report(
        ctx, RESILIENT_BLACKBOX_FAULT_PROGRESS_SILENT, *waiting, waitingInfo,
        {.stalledNs = now - waiting->watch.changedNs, .commSilentNs = commSilentNs, .nowNs = now});
  }

  blackbox::Writer* box = tracker_.blackbox();
  if (box != nullptr && ctx.commSlot >= 0) {
    CommProgress cp;
    cp.inFlight = inFlight;
    cp.lastProgressMonoNs = w.changedNs;
    resilient_blackbox_op record{};
    if (oldest != nullptr) {
      const uint32_t flags = oldest->flags.load(std::memory_order_relaxed);
      const uint32_t state = oldest->watch.reported            ? RESILIENT_BLACKBOX_OP_HUNG
                             : (flags & opflag::kStarted) != 0 ? RESILIENT_BLACKBOX_OP_RUNNING
                                                               : RESILIENT_BLACKBOX_OP_ENQUEUED;
      record = makeOpRecord(ctx, *oldest, oldestInfo, state);
      cp.oldest = &record;
    }
    box->writeComm(ctx.commSlot, makeCommRecord(ctx, RESILIENT_BLACKBOX_COMM_ACTIVE, now, cp));
  }
}

void HangDetector::report(Context& ctx, uint32_t faultClass, const OpSlot& op, const OpInfo& info,
                          const Stall& stall) noexcept {
  const uint64_t stuckChannels = stall.stuckChannels;
  const uint64_t stalledNs = stall.stalledNs;
  const uint64_t commSilentNs = stall.commSilentNs;
  try {
    HangFault f;
    f.faultClass = faultClass;
    f.commHash = ctx.commHash.load(std::memory_order_relaxed);
    f.rank = ctx.rank.load(std::memory_order_relaxed);
    f.nranks = ctx.nranks;
    f.commName = ctx.name;
    f.op = info;
    f.stuckChannels = stuckChannels;
    f.stalledNs = stalledNs;
    f.detectedMonoNs = stall.nowNs;

    char ofRanks[24] = "";  // v1-v3 init gives no rank count
    if (f.nranks > 0) {
      std::snprintf(ofRanks, sizeof ofRanks, " of %d", f.nranks);
    }
    char head[192];
    std::snprintf(head, sizeof head, "communicator 0x%016" PRIx64 "%s%s%s rank %d%s", f.commHash,
                  ctx.name.empty() ? "" : " \"", ctx.name.c_str(), ctx.name.empty() ? "" : "\"",
                  f.rank, ofRanks);
    const uint64_t timeoutMs = timeoutNs_ / kMs;
    std::string text;
    if (faultClass == RESILIENT_BLACKBOX_FAULT_COLL_HUNG) {
      text = "hung operation on " + std::string(head) + ": " + describeOp(info) +
             " made no progress for " + std::to_string(stalledNs / kMs) +
             " ms (NCCL_RESILIENT_COLL_TIMEOUT_MS=" + std::to_string(timeoutMs) + ")";
      text += ctx.kernelEvents ? "; kernel channels started and not finished: "
                               : "; channels with proxy operations not finished: ";
      text += channelList(stuckChannels);
      // Channel ids need not start at 0: compare counts only.
      const int started = std::popcount(op.channelsStarted.load(std::memory_order_relaxed));
      if (ctx.exactChannels && info.nChannels > 0 && started < info.nChannels) {
        text += "; only " + std::to_string(started) + " of " + std::to_string(info.nChannels) +
                " channels started";
      }
      if (stuckChannels != 0) {
        const auto first = static_cast<uint32_t>(std::countr_zero(stuckChannels));
        const uint32_t state = op.loadStepState(first);
        if (state != 0) {
          text +=
              "; last proxy step on channel " + std::to_string(first) + ": " + stepStateName(state);
          const char* meaning = stepStateMeaning(state);
          if (meaning[0] != '\0') {
            text += std::string(" (") + meaning + ")";
          }
        }
      }
      if (commSilentNs >= timeoutNs_) {
        text += "; no proxy-thread event at all on this communicator for " +
                std::to_string(commSilentNs / kMs) +
                " ms: its progress thread may have stopped (see the net plugin's faults)";
      }
    } else {
      text = "no progress on " + std::string(head) + ": " + describeOp(info) +
             " is enqueued and not started after " + std::to_string(stalledNs / kMs) +
             " ms, and the communicator had no kernel-channel or proxy event for " +
             std::to_string(commSilentNs / kMs) +
             " ms (NCCL_RESILIENT_COLL_TIMEOUT_MS=" + std::to_string(timeoutMs) +
             "): its proxy progress thread has stopped (a network error?) or the GPU never "
             "reached the kernels";
    }
    f.text = std::move(text);
    ctx.faults.fetch_add(1, std::memory_order_relaxed);
    sink_.report(f);
  } catch (...) {
    // Out of memory while describing a fault: nothing sensible to do.
  }
}

}  // namespace resilient::profiler
