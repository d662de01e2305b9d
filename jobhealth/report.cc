#include "jobhealth/report.h"

#include <cstdio>

#include "blackbox/writer.h"

namespace resilient::jobhealth {
namespace {

std::string endText(const ProcessEnd& e) {
  std::string s = e.rank >= 0 ? "rank " + std::to_string(e.rank) : std::string("rank ?");
  s += " (" + (e.host.empty() ? std::string("?") : e.host) + " pid " +
       (e.pid != 0 ? std::to_string(e.pid) : std::string("?"));
  if (!e.address.empty()) {
    s += " " + e.address;
  }
  return s + ")";
}

std::string rate(double bytesPerS) {
  char buf[48];
  if (bytesPerS >= 1e9) {
    std::snprintf(buf, sizeof buf, "%.2f GB/s", bytesPerS / 1e9);
  } else if (bytesPerS >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.1f MB/s", bytesPerS / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f kB/s", bytesPerS / 1e3);
  }
  return buf;
}

}  // namespace

const char* reportKindName(HealthReport::Kind kind) noexcept {
  switch (kind) {
    case HealthReport::Kind::kSlowLink: return "slow link";
    case HealthReport::Kind::kStraggler: return "straggler";
    case HealthReport::Kind::kStuckRank: return "stuck rank";
  }
  return "?";
}

std::optional<HealthReport::Kind> parseReportKind(std::string_view name) noexcept {
  for (const auto kind : {HealthReport::Kind::kSlowLink, HealthReport::Kind::kStraggler,
                          HealthReport::Kind::kStuckRank}) {
    if (name == reportKindName(kind)) {
      return kind;
    }
  }
  return std::nullopt;
}

std::string describe(const HealthReport& r) {
  char buf[512];
  const double windowS = static_cast<double>(r.windowNs) / 1e9;
  const char* outcome =
      r.restarts ? "the job restarts without it (action restart)" : "not a fault, nothing aborted";
  if (r.kind == HealthReport::Kind::kSlowLink) {
    const std::string against =
        r.againstHistory ? "its own best window (" + rate(r.referenceBytesPerS) + ")"
        : r.referenceBytesPerS > 0
            ? "the median of the job's other links (" + rate(r.referenceBytesPerS) + ")"
            : "while the job's other links were never busy (far faster)";
    char ratio[32];
    std::snprintf(ratio, sizeof ratio, "%.0f%% of ", r.ratio * 100);
    std::snprintf(buf, sizeof buf,
                  "slow link from %s to %s on communicator 0x%016llx: %s while busy over %.1f s, "
                  "%s%s; %s",
                  endText(r.subject).c_str(), endText(r.peer).c_str(),
                  static_cast<unsigned long long>(r.commId), rate(r.bytesPerS).c_str(), windowS,
                  r.referenceBytesPerS > 0 ? ratio : "", against.c_str(), outcome);
  } else if (r.kind == HealthReport::Kind::kStuckRank) {
    std::snprintf(buf, sizeof buf,
                  "stuck rank %s on communicator 0x%016llx: alive but has not entered collective "
                  "%llu (%s), in which %d of its ranks have waited for %.1f s (threshold %.1f s); "
                  "%s",
                  endText(r.subject).c_str(), static_cast<unsigned long long>(r.commId),
                  static_cast<unsigned long long>(r.collIndex),
                  r.function.empty() ? "function unknown" : r.function.c_str(), r.waitingRanks,
                  static_cast<double>(r.waitedNs) / 1e9, static_cast<double>(r.minLagNs) / 1e9,
                  outcome);
  } else {
    std::snprintf(buf, sizeof buf,
                  "straggler %s on communicator 0x%016llx: last to enqueue %d of the %d "
                  "collectives that waited %.0f ms or more for their last rank (of %d over "
                  "%.1f s), %.1f ms (median) after the median rank; %s",
                  endText(r.subject).c_str(), static_cast<unsigned long long>(r.commId),
                  r.lastCount, r.waited, static_cast<double>(r.minLagNs) / 1e6, r.collectives,
                  windowS, static_cast<double>(r.lagNs) / 1e6, outcome);
  }
  return buf;
}

resilient_blackbox_fault toBlackboxRecord(const HealthReport& r) {
  resilient_blackbox_fault f{};
  f.faultClass = r.kind == HealthReport::Kind::kSlowLink    ? RESILIENT_BLACKBOX_FAULT_SLOW_LINK
                 : r.kind == HealthReport::Kind::kStraggler ? RESILIENT_BLACKBOX_FAULT_STRAGGLER
                                                            : RESILIENT_BLACKBOX_FAULT_STUCK_RANK;
  f.commId = r.commId;
  f.peerPid = r.subject.pid;
  f.rank = r.subject.rank;
  f.remote = 0;
  blackbox::copyText(f.peer, r.subject.address.c_str());
  blackbox::copyText(f.peerHost, r.subject.host.c_str());
  blackbox::copyText(f.text, describe(r).c_str());
  return f;
}

}  // namespace resilient::jobhealth
