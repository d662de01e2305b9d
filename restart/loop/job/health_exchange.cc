#include "restart/loop/job/health_exchange.h"

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <vector>

#include "common/clock.h"
#include "common/log.h"
#include "jobhealth/json.h"
#include "restart/comm/collective_arrivals.h"
#include "store/errors.h"

namespace resilient::restart {

HealthExchange::HealthExchange(store::Store& store, const protocol::JobKeys& keys,
                               protocol::FaultLog& faults, RankRegistry& registry,
                               BlackboxWatch& blackbox, Interruption& interruption,
                               Timeline& timeline, HealthExchangeConfig config)
    : store_(store),
      keys_(keys),
      faults_(faults),
      registry_(registry),
      blackbox_(blackbox),
      interruption_(interruption),
      timeline_(timeline),
      config_(config),
      links_(config.links),
      stragglers_(config.stragglers),
      stuck_(config.stuckRanks),
      pid_(static_cast<uint32_t>(getpid())),
      // A store call may take one interval (at least a second): a frozen
      // store holds this thread, and the loop's stop of it, no longer.
      callTimeout_(std::max(config.interval, std::chrono::milliseconds(1000))) {
  thread_ = std::jthread([this](const std::stop_token& stop) { run(stop); });
}

HealthExchange::~HealthExchange() {
  if (thread_.joinable()) {
    thread_.request_stop();  // wakes its wait
    thread_.join();
  }
  if (config_.activeRank == 0 && rounds_ > 0) {
    timeline_.record(config_.iteration, "health compared",
                     std::to_string(rounds_) + " rounds, " + std::to_string(samples_) +
                         " samples, " + std::to_string(links_.measured()) + " link windows, " +
                         std::to_string(stragglers_.compared()) + " collectives");
  }
}

void HealthExchange::run(const std::stop_token& stop) {
  try {
    // Reports of earlier iterations were acted on then.
    reportsSeen_ = store_.add(keys_.healthReportCount(), 0, callTimeout_);
  } catch (const std::exception& e) {
    RES_INFO(log::kRestart, "restart: no health comparison: %s", e.what());
    return;  // the loop's own store calls report the store
  }
  std::mutex mutex;
  std::condition_variable_any wake;
  while (!stop.stop_requested() && !interruption_.raised()) {
    {
      std::unique_lock<std::mutex> lock(mutex);
      if (wake.wait_for(lock, stop, config_.interval, [] { return false; }) ||
          stop.stop_requested() || interruption_.raised()) {
        return;
      }
    }
    try {
      ship();
      if (config_.activeRank == 0) {
        compare();
      }
      readReports();
    } catch (const std::exception& e) {
      RES_INFO(log::kRestart, "restart: the health comparison stops: %s", e.what());
      return;
    }
  }
}

void HealthExchange::ship() {
  // The arrivals of the last three intervals: rank 0 reads at its own pace,
  // and the detectors count an arrival once however often it comes.
  const auto intervalNs = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(config_.interval).count());
  const uint64_t now = wallClockNs();
  const uint64_t since = now > 3 * intervalNs ? now - 3 * intervalNs : 0;
  jobhealth::RankSample sample;
  if (std::optional<blackbox::Snapshot> snap = blackbox_.snapshot()) {
    if (host_.empty()) {
      host_ = std::string(snap->header.host, strnlen(snap->header.host, sizeof snap->header.host));
    }
    sample = jobhealth::sampleOf(*snap, config_.activeRank, since);
  } else {
    // No plugin in this process (gloo, a plugin-less engine): the sample
    // still says the rank is alive, with the collectives no profiler sees.
    if (host_.empty()) {
      host_ = log::hostName();
    }
    sample.rank = config_.activeRank;
    sample.pid = pid_;
    sample.host = host_;
    sample.wallNs = now;
  }
  CollectiveArrivals::process().addTo(&sample, since);
  if (config_.activity) {
    const RankActivity activity = config_.activity();
    if (activity.lastPingMonoNs != 0) {
      const uint64_t mono = monotonicNs();
      const uint64_t age = mono > activity.lastPingMonoNs ? mono - activity.lastPingMonoNs : 0;
      sample.lastPingWallNs = now > age ? now - age : 0;
    }
    sample.waitingDeclared = activity.hangProtectionOff;
  }
  store_.set(keys_.healthSample(config_.iteration, config_.activeRank),
             jobhealth::sampleJson(sample).dump(), callTimeout_);
}

void HealthExchange::compare() {
  std::vector<std::string> keys;
  for (int r = 0; r < config_.activeWorldSize; ++r) {
    keys.push_back(keys_.healthSample(config_.iteration, r));
  }
  std::vector<jobhealth::RankSample> samples;
  for (const auto& value : store_.multiGet(keys, callTimeout_)) {
    if (!value) {
      continue;  // that rank has not shipped one yet
    }
    const auto json = nlohmann::json::parse(*value, nullptr, false);
    auto sample = jobhealth::sampleFromJson(json);
    if (!sample.ok()) {
      RES_INFO(log::kRestart, "restart: health comparison: %s", sample.status().toString().c_str());
      continue;
    }
    samples.push_back(std::move(sample).value());
  }
  ++rounds_;
  samples_ += samples.size();
  std::vector<jobhealth::HealthReport> found = links_.update(samples);
  for (auto& r : stragglers_.update(samples)) {
    found.push_back(std::move(r));
  }
  for (auto& r : stuck_.update(samples)) {
    found.push_back(std::move(r));
  }
  for (auto& r : found) {
    switch (r.kind) {
      case jobhealth::HealthReport::Kind::kSlowLink: r.restarts = config_.restartOnSlowLink; break;
      case jobhealth::HealthReport::Kind::kStraggler:
        r.restarts = config_.restartOnStraggler;
        break;
      case jobhealth::HealthReport::Kind::kStuckRank:
        r.restarts = config_.restartOnStuckRank;
        break;
    }
    RES_WARN(log::kRestart, "restart: %s", jobhealth::describe(r).c_str());
    const int64_t number = store_.add(keys_.healthReportCount(), 1, callTimeout_);
    store_.set(keys_.healthReport(number), jobhealth::reportJson(r).dump(), callTimeout_);
    act(r);
  }
}

void HealthExchange::act(const jobhealth::HealthReport& r) {
  if (!r.restarts) {
    return;
  }
  protocol::FaultRecord f;
  f.iteration = config_.iteration;
  f.reporter = config_.initialRank;
  f.reason = protocol::FaultReason::kHealthReport;
  f.culprit = registry_.find(r.subject.host, r.subject.pid);
  f.subject = f.culprit;
  f.detail = jobhealth::describe(r);
  publishAndRaise(faults_, f, interruption_);
}

void HealthExchange::readReports() {
  const int64_t count = store_.add(keys_.healthReportCount(), 0, callTimeout_);
  while (reportsSeen_ < count) {
    const std::optional<std::string> value =
        store_.get(keys_.healthReport(reportsSeen_ + 1), callTimeout_);
    if (!value) {
      return;  // counted, not written yet: the next look
    }
    ++reportsSeen_;
    auto report = jobhealth::reportFromJson(nlohmann::json::parse(*value, nullptr, false));
    if (!report.ok()) {
      continue;
    }
    const auto isMe = [this](const jobhealth::ProcessEnd& e) {
      return e.pid == pid_ && (e.host.empty() || host_.empty() || e.host == host_);
    };
    if (!isMe(report->subject) && !isMe(report->peer)) {
      continue;
    }
    const std::string text = jobhealth::describe(*report);
    if (config_.activeRank != 0) {
      RES_WARN(log::kRestart, "restart: %s", text.c_str());
    }
    blackbox_.recordReport(jobhealth::toBlackboxRecord(*report));
    timeline_.record(config_.iteration, "health report", text);
  }
}

}  // namespace resilient::restart
