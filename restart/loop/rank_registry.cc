#include "restart/loop/rank_registry.h"

#include <unistd.h>

#include <array>
#include <stdexcept>
#include <vector>

#include <nlohmann/json.hpp>

namespace resilient::restart {

RankIdentity RankIdentity::ofThisProcess() {
  std::array<char, 256> host{};
  if (::gethostname(host.data(), host.size() - 1) != 0) {
    host[0] = '\0';
  }
  RankIdentity id;
  id.host = host.data();
  id.pid = ::getpid();
  return id;
}

std::string RankIdentity::toJson() const {
  return nlohmann::json{{"host", host}, {"pid", pid}, {"monitor_pid", monitorPid}}.dump();
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
  return id;
}

RankRegistry::RankRegistry(store::Store& store, const protocol::JobKeys& keys, int worldSize)
    : store_(store), keys_(keys), worldSize_(worldSize) {}

void RankRegistry::publish(int initialRank, const RankIdentity& identity) {
  store_.set(keys_.identity(initialRank), identity.toJson());
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
    reload();
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
