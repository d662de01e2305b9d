#include "restart/loop/job/joiners.h"

#include <algorithm>
#include <functional>
#include <optional>
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

JoinerTicket registerJoiner(store::Store& store, const protocol::JobKeys& keys,
                            RankRegistry& registry, int initialWorldSize,
                            const RankIdentity& identity) {
  // By claim, not by add: a claim sent twice (a client that resends a call
  // lost to a store restart, the node proxy's and the rank's own) is one
  // claim, where an add applied twice drew a number no process held.
  JoinerTicket ticket;
  ticket.number = registeredJoiners(store, keys, 0) + 1;
  while (registry.tryClaim(initialWorldSize + static_cast<int>(ticket.number) - 1, identity)) {
    ++ticket.number;  // another process's
  }
  ticket.initialRank = initialWorldSize + static_cast<int>(ticket.number) - 1;
  raiseJoinerCount(store, keys, ticket.number);
  return ticket;
}

void raiseJoinerCount(store::Store& store, const protocol::JobKeys& keys, int64_t atLeast) {
  std::optional<std::string> current = store.get(keys.joinerCount());
  while ((current ? std::stoll(*current) : 0) < atLeast) {
    const store::CasResult put =
        store.compareSet(keys.joinerCount(), current, std::to_string(atLeast));
    if (put.swapped) {
      return;
    }
    current = put.current;
  }
}

Admissions admissionsOf(store::Store& store, const protocol::JobKeys& keys, int k,
                        int64_t admittedSoFar, int64_t total, const World& current,
                        const World& next) {
  Admissions a{k, admittedSoFar, total, current, next, {}};
  // Joiner n's initial rank: after the job's initial ranks.
  const int firstJoinerRank = current.initialWorldSize() - static_cast<int>(admittedSoFar);
  std::vector<std::string> names;
  for (int64_t n = admittedSoFar + 1; n <= total; ++n) {
    names.push_back(keys.identity(firstJoinerRank + static_cast<int>(n) - 1));
  }
  for (const std::optional<std::string>& v : store.multiGet(names)) {
    a.identities.push_back(v.value_or(""));
  }
  return a;
}

void announceAdmissions(store::Store& store, const protocol::JobKeys& keys, const Admissions& a) {
  // The Worlds first: a joiner reads them once its own key wakes it.
  store.set(keys.world(a.iteration), worldToText(a.current));
  store.set(keys.world(a.iteration + 1), worldToText(a.next));
  for (int64_t n = a.admittedSoFar + 1; n <= a.total; ++n) {
    const std::string& identity = a.identities.at(static_cast<size_t>(n - a.admittedSoFar - 1));
    nlohmann::json wakeUp{{"iteration", a.iteration + 1}, {"identity", nullptr}};
    if (!identity.empty()) {
      wakeUp["identity"] = nlohmann::json::parse(identity, nullptr, false);
    }
    store.set(keys.joinerAdmitted(n), wakeUp.dump());
  }
}

namespace {

// Why initial rank `ticket.initialRank` is not this process's, or "" while it is.
std::string notMine(store::Store& store, const protocol::JobKeys& keys, RankRegistry& registry,
                    const JoinerTicket& ticket, const RankIdentity& identity) {
  const std::optional<RankIdentity> holder = registry.holderOf(ticket.initialRank);
  if (holder && !holder->sameProcess(identity)) {
    return "initial rank " + std::to_string(ticket.initialRank) + " is held by " +
           holder->describe();
  }
  if (const auto why = store.get(keys.terminated(ticket.initialRank))) {
    return "initial rank " + std::to_string(ticket.initialRank) + " is terminated (" + *why + ")";
  }
  return {};
}

JoinerWait withdrawn(const JoinerTicket& ticket, const std::string& why) {
  return JoinerWait{JoinerWait::End::kWithdrawn, {},
                    "joiner " + std::to_string(ticket.number) + ": " + why};
}

// Waits for `wanted` in slices of `slice`; after each, `progress` runs and
// `between` may end the wait (the job finished, the rank is not ours).
std::optional<JoinerWait> waitInSlices(store::Store& store, const std::vector<std::string>& wanted,
                                       std::chrono::milliseconds slice,
                                       const std::function<void()>& progress,
                                       const std::function<std::optional<JoinerWait>()>& between) {
  for (;;) {
    try {
      // Woken by the keys themselves (the store pushes them).
      store.wait(wanted, slice);
      return std::nullopt;
    } catch (const store::TimeoutError&) {
      if (progress) {
        progress();
      }
      if (std::optional<JoinerWait> end = between()) {
        return end;
      }
    }
  }
}

}  // namespace

JoinerWait waitForAdmission(store::Store& store, const protocol::JobKeys& keys,
                            RankRegistry& registry, const JoinerTicket& ticket,
                            const RankIdentity& identity, std::chrono::milliseconds slice,
                            const std::function<void()>& progress) {
  const std::string mine = keys.joinerAdmitted(ticket.number);
  const auto finished = [&]() -> std::optional<JoinerWait> {
    if (store.get(keys.finished()).has_value()) {
      return JoinerWait{};
    }
    return std::nullopt;
  };
  if (auto end = waitInSlices(store, {mine}, slice, progress, [&]() -> std::optional<JoinerWait> {
        if (auto done = finished()) {
          return done;
        }
        if (std::string why = notMine(store, keys, registry, ticket, identity); !why.empty()) {
          return withdrawn(ticket, why);
        }
        return std::nullopt;
      })) {
    return *end;
  }
  const std::string text = store.get(mine).value_or("");
  const nlohmann::json wakeUp = nlohmann::json::parse(text, nullptr, false);
  if (!wakeUp.is_object() || !wakeUp.contains("iteration") ||
      !wakeUp["iteration"].is_number_integer() || wakeUp["iteration"].get<int>() < 1 ||
      !wakeUp.contains("identity")) {
    throw std::invalid_argument("joiner " + std::to_string(ticket.number) +
                                ": its admission is malformed: \"" + text + "\"");
  }
  const int iteration = wakeUp["iteration"].get<int>();
  if (const nlohmann::json& admitted = wakeUp["identity"]; !admitted.is_null()) {
    // Put back after a store restart, it may name the process that drew this
    // number before the restart.
    const RankIdentity named = RankIdentity::fromJson(admitted.dump());
    if (!named.sameProcess(identity)) {
      return withdrawn(ticket, "its admission into iteration " + std::to_string(iteration) +
                                   " names " + named.describe());
    }
  } else if (std::string why = notMine(store, keys, registry, ticket, identity); !why.empty()) {
    // Admitted before its claim was read: the registry has the last word.
    return withdrawn(ticket, why);
  }
  // Written before the wake-up; after a store restart in between, put back
  // with it by the rank that announced it (restart/loop/store_restarts.h).
  const std::vector<std::string> worldKeys{keys.world(iteration), keys.world(iteration - 1)};
  if (auto end = waitInSlices(store, worldKeys, slice, progress, finished)) {
    return *end;
  }
  const auto worlds = store.multiGet(worldKeys);
  if (!worlds[0] || !worlds[1]) {
    throw std::invalid_argument("joiner " + std::to_string(ticket.number) +
                                ": admitted into iteration " + std::to_string(iteration) +
                                ", whose World is not in the store");
  }
  return JoinerWait{JoinerWait::End::kAdmitted,
                    Admission{iteration, worldFromText(*worlds[0]), worldFromText(*worlds[1])},
                    {}};
}

int64_t registeredJoiners(store::Store& store, const protocol::JobKeys& keys,
                          int64_t admittedSoFar) {
  const std::optional<std::string> count = store.get(keys.joinerCount());
  return std::max<int64_t>(count ? std::stoll(*count) : 0, admittedSoFar);
}

}  // namespace resilient::restart
