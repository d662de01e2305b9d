#include "restart/monitor/monitor_config.h"

#include <stdexcept>

namespace resilient::restart::monitor {

namespace {

std::string ms(Millis v) {
  return std::to_string(v.count()) + " ms";
}

void requireLess(const char* smallName, Millis small, const char* largeName, Millis large) {
  if (!(small < large)) {
    throw std::invalid_argument(std::string(smallName) + " (" + ms(small) + ") must be less than " +
                                largeName + " (" + ms(large) + ")");
  }
}

void requirePositive(const char* name, Millis v) {
  if (v <= Millis(0)) {
    throw std::invalid_argument(std::string(name) + " must be positive (got " + ms(v) + ")");
  }
}

}  // namespace

void MonitorConfig::validate() const {
  if (statusFd < 0) {
    throw std::invalid_argument("--status-fd must name an open descriptor (got " +
                                std::to_string(statusFd) + ")");
  }
  if (storeUrl.empty()) {
    throw std::invalid_argument("--store must name the job's store (a URL)");
  }
  if (jobId.empty() || jobId.find('/') != std::string::npos) {
    throw std::invalid_argument("--job must be non-empty and contain no '/' (got \"" + jobId +
                                "\")");
  }
  if (worldSize < 1) {
    throw std::invalid_argument("--world-size must be at least 1 (got " +
                                std::to_string(worldSize) + ")");
  }
  // A process that joined the running job has an initial rank past the
  // initial world size (restart/loop/job/joiners.h).
  if (rank < 0) {
    throw std::invalid_argument("--rank must be 0 or more (got " + std::to_string(rank) + ")");
  }
  requirePositive("--interval-ms", interval);
  requirePositive("--heartbeat-interval-ms", heartbeatInterval);
  requirePositive("--heartbeat-timeout-ms", heartbeatTimeout);
  requirePositive("--soft-timeout-ms", softTimeout);
  requirePositive("--hard-timeout-ms", hardTimeout);
  requirePositive("--barrier-timeout-ms", barrierTimeout);
  requirePositive("--grace-ms", grace);
  if (storeTimeout < Millis(0)) {
    throw std::invalid_argument("--store-timeout-ms must not be negative (got " + ms(storeTimeout) +
                                ")");
  }
  // The reference's ordering rules (docs/reference/restart-model.md §1.2), in its order.
  requireLess("the soft timeout", softTimeout, "the hard timeout", hardTimeout);
  requireLess("the hard timeout", hardTimeout, "the barrier timeout", barrierTimeout);
  requireLess("the monitor interval", interval, "the barrier timeout", barrierTimeout);
  requireLess("the monitor interval", interval, "the heartbeat timeout", heartbeatTimeout);
  requireLess("the monitor interval", interval, "the soft timeout", softTimeout);
  requireLess("the heartbeat interval", heartbeatInterval, "the heartbeat timeout",
              heartbeatTimeout);
  requireLess("the heartbeat timeout", heartbeatTimeout, "the barrier timeout", barrierTimeout);
}

std::vector<std::string> MonitorConfig::arguments() const {
  std::vector<std::string> a = {
      "--status-fd",
      std::to_string(statusFd),
      "--store",
      storeUrl,
      "--job",
      jobId,
      "--rank",
      std::to_string(rank),
      "--world-size",
      std::to_string(worldSize),
      "--interval-ms",
      std::to_string(interval.count()),
      "--heartbeat-interval-ms",
      std::to_string(heartbeatInterval.count()),
      "--heartbeat-timeout-ms",
      std::to_string(heartbeatTimeout.count()),
      "--soft-timeout-ms",
      std::to_string(softTimeout.count()),
      "--hard-timeout-ms",
      std::to_string(hardTimeout.count()),
      "--barrier-timeout-ms",
      std::to_string(barrierTimeout.count()),
      "--grace-ms",
      std::to_string(grace.count()),
  };
  if (livenessFd >= 0) {
    a.insert(a.end(), {"--liveness-fd", std::to_string(livenessFd)});
  }
  if (storeTimeout > Millis(0)) {
    a.insert(a.end(), {"--store-timeout-ms", std::to_string(storeTimeout.count())});
  }
  if (!logFile.empty()) {
    a.insert(a.end(), {"--log-file", logFile});
  }
  if (!pidFile.empty()) {
    a.insert(a.end(), {"--pid-file", pidFile});
  }
  if (!blackboxDir.empty()) {
    a.insert(a.end(), {"--blackbox-dir", blackboxDir});
  }
  return a;
}

std::string expandRankPlaceholder(const std::string& path, int rank) {
  static constexpr std::string_view kPlaceholder = "{rank}";
  const std::string r = std::to_string(rank);
  std::string out;
  size_t pos = 0;
  for (size_t hit = path.find(kPlaceholder); hit != std::string::npos;
       hit = path.find(kPlaceholder, pos)) {
    out.append(path, pos, hit - pos).append(r);
    pos = hit + kPlaceholder.size();
  }
  out.append(path, pos);
  return out;
}

}  // namespace resilient::restart::monitor
