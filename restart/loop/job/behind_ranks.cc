#include "restart/loop/job/behind_ranks.h"

#include <stdexcept>

#include <nlohmann/json.hpp>

namespace resilient::restart {

CommProgress commProgressOf(BlackboxWatch& blackbox) {
  CommProgress out;
  for (const auto& view : blackbox.comms()) {
    out[view.comm.commId] = view.comm.collEnqueued + view.comm.p2pEnqueued;
  }
  return out;
}

std::string encodeCommProgress(const CommProgress& progress) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [comm, ops] : progress) {
    j[std::to_string(comm)] = ops;
  }
  return j.dump();
}

CommProgress decodeCommProgress(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) {
    throw std::invalid_argument("communicator progress is not a JSON object: " + text);
  }
  CommProgress out;
  for (const auto& [key, value] : j.items()) {
    if (!value.is_number_unsigned()) {
      throw std::invalid_argument("communicator progress of " + key + " is not a count");
    }
    out[std::stoull(key)] = value.get<uint64_t>();
  }
  return out;
}

namespace {

std::string progressKey(const protocol::JobKeys& keys, int iteration, int rank) {
  return keys.prefix() + "iteration/" + std::to_string(iteration) + "/progress/" +
         std::to_string(rank);
}

}  // namespace

void publishCommProgress(store::Store& store, const protocol::JobKeys& keys, int iteration,
                         int initialRank, const CommProgress& progress) {
  store.set(progressKey(keys, iteration, initialRank), encodeCommProgress(progress));
}

std::map<int, CommProgress> readCommProgress(store::Store& store, const protocol::JobKeys& keys,
                                             int iteration, const std::vector<int>& ranks) {
  std::vector<std::string> names;
  names.reserve(ranks.size());
  for (const int r : ranks) {
    names.push_back(progressKey(keys, iteration, r));
  }
  std::map<int, CommProgress> out;
  if (names.empty()) {
    return out;
  }
  const auto values = store.multiGet(names);
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (values[i]) {
      out[ranks[i]] = decodeCommProgress(*values[i]);
    }
  }
  return out;
}

std::set<int> behindRanks(const std::map<int, CommProgress>& progress) {
  std::map<uint64_t, std::vector<std::pair<int, uint64_t>>> byComm;
  for (const auto& [rank, comms] : progress) {
    for (const auto& [comm, ops] : comms) {
      byComm[comm].emplace_back(rank, ops);
    }
  }
  std::set<int> behind;
  for (const auto& [comm, members] : byComm) {
    uint64_t most = 0;
    for (const auto& [rank, ops] : members) {
      most = std::max(most, ops);
    }
    int atMost = 0;
    for (const auto& [rank, ops] : members) {
      atMost += ops == most ? 1 : 0;
    }
    if (atMost < 2) {
      continue;
    }
    for (const auto& [rank, ops] : members) {
      if (ops < most) {
        behind.insert(rank);
      }
    }
  }
  return behind;
}

}  // namespace resilient::restart
