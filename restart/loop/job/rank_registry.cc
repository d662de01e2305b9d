#include "restart/loop/job/rank_registry.h"

#include <unistd.h>

#include <array>
#include <random>
#include <stdexcept>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/log.h"
#include "resilient/restart/errors.hpp"

namespace resilient::restart {

RankIdentity RankIdentity::ofThisProcess() {
  std::array<char, 256> host{};
  if (::gethostname(host.data(), host.size() - 1) != 0) {
    host[0] = '\0';
  }
  RankIdentity id;
  id.host = host.data();
  id.pid = ::getpid();
  std::random_device entropy;
  id.instance = (uint64_t{entropy()} << 32) | entropy();
  return id;
}

std::string RankIdentity::toJson() const {
  return nlohmann::json{
      {"host", host}, {"pid", pid}, {"monitor_pid", monitorPid}, {"instance", instance}}
      .dump();
}

RankIdentity RankIdentity::fromJson(std::string_view json) {
  const nlohmann::json j = nlohmann::json::parse(json, nullptr, false);
  if (!j.is_object() || !j.contains("host") || !j.contains("pid")) {
    throw std::invalid_argument("a rank identity is malformed: " + std::string(json));
  }
  RankIdentity id;
  id.host = j["host"].get<std::string>();
  id.pid = j["pid"].get<int64_t>();
  id.monitorPid = j.value("monitor_pid", int64_t{0});
  id.instance = j.value("instance", uint64_t{0});
  return id;
}

RankRegistry::RankRegistry(store::Store& store, const protocol::JobKeys& keys, int worldSize)
    : store_(store), keys_(keys), worldSize_(worldSize) {}

std::string RankIdentity::describe() const {
  return "pid " + std::to_string(pid) + " on host \"" + host + "\"";
}

namespace {

// The holder an entry names (nullopt: none).
std::optional<RankIdentity> holderIn(const std::optional<std::string>& entry) {
  if (!entry) {
    return std::nullopt;
  }
  try {
    return RankIdentity::fromJson(*entry);
  } catch (const std::exception&) {
    return RankIdentity{};  // not an identity of ours: held all the same
  }
}

}  // namespace

std::optional<RankIdentity> RankRegistry::tryClaim(int initialRank, const RankIdentity& identity) {
  const std::string mine = identity.toJson();
  const store::CasResult result = store_.compareSet(keys_.identity(initialRank), std::nullopt, mine);
  if (result.swapped || result.current == mine) {
    return std::nullopt;  // ours (the second case: a retried claim whose first try went through)
  }
  return holderIn(result.current.value_or(""));
}

std::optional<RankIdentity> RankRegistry::holderOf(int initialRank) {
  return holderIn(store_.get(keys_.identity(initialRank)));
}

void RankRegistry::claim(int initialRank, const RankIdentity& identity) {
  const std::optional<RankIdentity> other = tryClaim(initialRank, identity);
  if (!other) {
    return;
  }
  const std::string holder = other->pid != 0 ? other->describe() : "another process";
  throw ConfigError("job id \"" + keys_.jobId() + "\" is in use in this store: initial rank " +
                    std::to_string(initialRank) + " is held by " + holder + " (key " +
                    keys_.identity(initialRank) +
                    "), from an earlier job with the same id or a second process started as rank " +
                    std::to_string(initialRank) +
                    "; give every job its own NCCL_RESILIENT_RESTART_JOB (Options::jobId) or "
                    "a fresh store");
}

void RankRegistry::publish(int initialRank, const RankIdentity& identity) {
  store_.set(keys_.identity(initialRank), identity.toJson());
}

bool RankRegistry::replace(int initialRank, const RankIdentity& claimed,
                           const RankIdentity& identity) {
  return store_.compareSet(keys_.identity(initialRank), claimed.toJson(), identity.toJson())
      .swapped;
}

void RankRegistry::setWorldSize(int worldSize) {
  std::lock_guard<std::mutex> lock(mutex_);
  worldSize_ = worldSize;
}

void RankRegistry::reload() {
  std::vector<std::string> names;
  names.reserve(static_cast<size_t>(worldSize_));
  for (int r = 0; r < worldSize_; ++r) {
    names.push_back(keys_.identity(r));
  }
  const auto values = store_.multiGet(names);
  for (int r = 0; r < worldSize_; ++r) {
    const auto& v = values[static_cast<size_t>(r)];
    if (v) {
      const RankIdentity id = RankIdentity::fromJson(*v);
      byProcess_[{id.host, id.pid}] = r;
      hostByRank_[r] = id.host;
    }
  }
}

int RankRegistry::find(const std::string& host, int64_t pid) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = byProcess_.find({host, pid});
  if (it == byProcess_.end()) {
    try {
      reload();
    } catch (const std::exception& e) {
      // Asked from the monitor thread as it publishes a fault (an exception
      // there ended the process: the agent drill with the store killed 5 ms
      // after a SIGKILL); the fault is published without its culprit.
      RES_WARN(log::kRestart, "restart: cannot read the job's identities (pid %lld on %s): %s",
               static_cast<long long>(pid), host.c_str(), e.what());
      return -1;
    }
    it = byProcess_.find({host, pid});
  }
  return it == byProcess_.end() ? -1 : it->second;
}

std::string RankRegistry::hostOf(int initialRank) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = hostByRank_.find(initialRank);
  if (it == hostByRank_.end()) {
    reload();
    it = hostByRank_.find(initialRank);
  }
  return it == hostByRank_.end() ? std::string() : it->second;
}

}  // namespace resilient::restart
