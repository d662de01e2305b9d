#include "restart/loop/job/joiners.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "store/errors.h"

namespace resilient::restart {

std::string worldToText(const World& world) {
  nlohmann::json slots = nlohmann::json::array();
  for (int i = 0; i < world.initialWorldSize(); ++i) {
    const RankSlot& s = world.at(i);
    slots.push_back({s.rank, static_cast<int>(s.mode), s.activeRank});
  }
  return slots.dump();
}

World worldFromText(std::string_view text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_array() || j.empty()) {
    throw std::invalid_argument("a World in the store is malformed: " + std::string(text));
  }
  World world(static_cast<int>(j.size()));
  for (size_t i = 0; i < j.size(); ++i) {
    const nlohmann::json& s = j[i];
    if (!s.is_array() || s.size() != 3 || !s[0].is_number_integer() ||
        !s[1].is_number_integer() || !s[2].is_number_integer()) {
      throw std::invalid_argument("a World in the store has a malformed slot " +
                                  std::to_string(i) + ": " + s.dump());
    }
    const int mode = s[1].get<int>();
    if (mode < static_cast<int>(Mode::kActive) || mode > static_cast<int>(Mode::kTerminated)) {
      throw std::invalid_argument("a World in the store has slot " + std::to_string(i) +
                                  " in mode " + std::to_string(mode));
    }
    world.at(static_cast<int>(i)) =
        RankSlot{s[0].get<int>(), static_cast<Mode>(mode), s[2].get<int>()};
  }
  if (std::string why = world.inconsistency(); !why.empty()) {
    throw std::invalid_argument("a World in the store is inconsistent: " + why);
  }
  return world;
}

int64_t registerJoiner(store::Store& store, const protocol::JobKeys& keys) {
  return store.add(keys.joinerCount(), 1);
}

std::optional<Admission> waitForAdmission(store::Store& store, const protocol::JobKeys& keys,
                                          int64_t index, std::chrono::milliseconds slice,
                                          const std::function<bool()>& stop) {
  const std::string mine = keys.joinerAdmitted(index);
  for (;;) {
    try {
      // Woken by the announcement itself (the store pushes the key).
      store.wait({mine}, slice);
      break;
    } catch (const store::TimeoutError&) {
      if (store.get(keys.finished()).has_value() || (stop && stop())) {
        return std::nullopt;
      }
    }
  }
  const std::optional<std::string> first = store.get(mine);
  const int iteration = std::stoi(first.value_or("-1"));
  if (iteration < 1) {
    throw std::invalid_argument("joiner " + std::to_string(index) + ": admitted into iteration \"" +
                                first.value_or("") + "\"");
  }
  // Written before the wake-up; after a store restart in between, put back
  // with it by the rank that announced it (restart/loop/store_restarts.h).
  const std::vector<std::string> worldKeys{keys.world(iteration), keys.world(iteration - 1)};
  for (;;) {
    try {
      store.wait(worldKeys, slice);
      break;
    } catch (const store::TimeoutError&) {
      if (store.get(keys.finished()).has_value() || (stop && stop())) {
        return std::nullopt;
      }
    }
  }
  const auto worlds = store.multiGet(worldKeys);
  if (!worlds[0] || !worlds[1]) {
    throw std::invalid_argument("joiner " + std::to_string(index) + ": admitted into iteration " +
                                std::to_string(iteration) + ", whose World is not in the store");
  }
  return Admission{iteration, worldFromText(*worlds[0]), worldFromText(*worlds[1])};
}

int64_t registeredJoiners(store::Store& store, const protocol::JobKeys& keys,
                          int64_t admittedSoFar) {
  const std::optional<std::string> count = store.get(keys.joinerCount());
  return std::max<int64_t>(count ? std::stoll(*count) : 0, admittedSoFar);
}

void announceAdmissions(store::Store& store, const protocol::JobKeys& keys, int k,
                        int64_t admittedSoFar, int64_t total, const World& current,
                        const World& next) {
  // The Worlds first: a joiner reads them once its own key wakes it.
  store.set(keys.world(k), worldToText(current));
  store.set(keys.world(k + 1), worldToText(next));
  for (int64_t n = admittedSoFar + 1; n <= total; ++n) {
    store.set(keys.joinerAdmitted(n), std::to_string(k + 1));
  }
}

}  // namespace resilient::restart
