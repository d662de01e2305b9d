#include "restart/protocol/fault_record.h"

#include <array>
#include <stdexcept>
#include <utility>

#include <nlohmann/json.hpp>

namespace resilient::restart::protocol {

namespace {

constexpr std::array<std::pair<FaultReason, const char*>, 13> kNames{{
    {FaultReason::kException, "exception"},
    {FaultReason::kRestartAbort, "restart-abort"},
    {FaultReason::kSoftTimeout, "soft-timeout"},
    {FaultReason::kHardTimeout, "hard-timeout"},
    {FaultReason::kTerminated, "terminated"},
    {FaultReason::kUnresponsive, "unresponsive"},
    {FaultReason::kMonitorProcess, "monitor-process"},
    {FaultReason::kNetFault, "net-fault"},
    {FaultReason::kCollectiveHung, "collective-hung"},
    {FaultReason::kHealthCheck, "health-check"},
    {FaultReason::kCommunicator, "communicator"},
    {FaultReason::kBarrierTimeout, "barrier-timeout"},
    {FaultReason::kHealthReport, "health-report"},
}};

}  // namespace

const char* faultReasonName(FaultReason reason) noexcept {
  for (const auto& [r, name] : kNames) {
    if (r == reason) {
      return name;
    }
  }
  return "unknown";
}

std::optional<FaultReason> parseFaultReason(std::string_view name) noexcept {
  for (const auto& [r, n] : kNames) {
    if (name == n) {
      return r;
    }
  }
  return std::nullopt;
}

std::string FaultRecord::toJson() const {
  const nlohmann::json j = {
      {"iteration", iteration},
      {"reason", faultReasonName(reason)},
      {"reporter", reporter},
      {"subject", subject},
      {"culprit", culprit},
      {"detail", detail},
      {"wall_ns", wallNs},
      {"detected_ns", detectedNs},
      {"host", host},
      {"pid", pid},
  };
  return j.dump();
}

FaultRecord FaultRecord::fromJson(std::string_view json) {
  const nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    throw std::invalid_argument("a fault record is not a JSON object: " + std::string(json));
  }
  try {
    FaultRecord r;
    r.iteration = j.at("iteration").get<int>();
    const std::string reason = j.at("reason").get<std::string>();
    const std::optional<FaultReason> parsed = parseFaultReason(reason);
    if (!parsed) {
      throw std::invalid_argument("unknown fault reason \"" + reason + "\"");
    }
    r.reason = *parsed;
    r.reporter = j.at("reporter").get<int>();
    r.subject = j.at("subject").get<int>();
    r.culprit = j.at("culprit").get<int>();
    r.detail = j.at("detail").get<std::string>();
    r.wallNs = j.at("wall_ns").get<uint64_t>();
    // Absent in the records of a monitor process of an older build.
    r.detectedNs = j.value("detected_ns", uint64_t{0});
    r.host = j.at("host").get<std::string>();
    r.pid = j.at("pid").get<int64_t>();
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(std::string("a fault record is malformed: ") + e.what());
  }
}

std::string FaultRecord::describe() const {
  std::string s = "iteration " + std::to_string(iteration) + ": " + faultReasonName(reason);
  if (subject >= 0 && subject != reporter) {
    s += " of rank " + std::to_string(subject);
  }
  s += reporter >= 0 ? " reported by rank " + std::to_string(reporter) : " reported by a monitor";
  if (culprit >= 0) {
    s += " (culprit rank " + std::to_string(culprit) + ")";
  }
  if (!detail.empty()) {
    s += ": " + detail;
  }
  return s;
}

}  // namespace resilient::restart::protocol
