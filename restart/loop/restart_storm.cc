#include "restart/loop/restart_storm.h"

#include <algorithm>
#include <map>

namespace resilient::restart {
namespace {

// What makes two restarts "the same fault": the root record's reason and
// ranks (its detail names an iteration, a step, an address); and how it
// reads, less its iteration.
std::string kindOf(const std::vector<protocol::FaultRecord>& records) {
  if (records.empty()) {
    return "none";
  }
  const protocol::FaultRecord& root = records.front();
  return std::string(protocol::faultReasonName(root.reason)) + "/" +
         std::to_string(root.reporter) + "/" + std::to_string(root.subject) + "/" +
         std::to_string(root.culprit);
}

std::string textOf(const std::vector<protocol::FaultRecord>& records) {
  if (records.empty()) {
    return "no fault record";
  }
  const std::string text = records.front().describe();
  const size_t colon = text.find(": ");  // "iteration k: ..."
  return colon == std::string::npos ? text : text.substr(colon + 2);
}

}  // namespace

void RestartStorm::remember(int iteration, int64_t atMs,
                            const std::vector<protocol::FaultRecord>& records) {
  recent_.push_back({iteration, atMs, kindOf(records), textOf(records)});
}

RestartStorm::Verdict RestartStorm::restart(int iteration, int64_t nowMs,
                                            const std::vector<protocol::FaultRecord>& records) {
  recent_.push_back({iteration, nowMs, kindOf(records), textOf(records)});
  while (!recent_.empty() && recent_.front().atMs <= nowMs - policy_.window.count()) {
    recent_.pop_front();
  }
  Verdict v;
  v.inWindow = static_cast<int>(recent_.size());
  if (policy_.limit > 0 && v.inWindow > policy_.limit) {
    std::map<std::string, std::pair<int, std::string>> counts;  // kind -> times, latest text
    for (const Restart& r : recent_) {
      auto& c = counts[r.kind];
      ++c.first;
      c.second = r.text;
    }
    const auto most = std::max_element(counts.begin(), counts.end(), [](const auto& a, const auto& b) {
      return a.second.first < b.second.first;
    });
    v.stop = true;
    v.message = "restart storm: " + std::to_string(v.inWindow) + " restarts within " +
                std::to_string(policy_.window.count()) + " ms (limit " +
                std::to_string(policy_.limit) + ", iterations " +
                std::to_string(recent_.front().iteration) + " to " + std::to_string(iteration) +
                "); the recurring fault, " + std::to_string(most->second.first) +
                " times: " + most->second.second;
    return v;
  }
  if (v.inWindow >= 2) {
    const int doublings = std::min(v.inWindow - 2, 30);
    const int64_t ms = policy_.backoff.count() << doublings;
    v.backoff = std::chrono::milliseconds(std::min<int64_t>(ms, policy_.backoffMax.count()));
  }
  return v;
}

}  // namespace resilient::restart
