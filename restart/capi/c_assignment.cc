// resilient_restart_policy_* and resilient_restart_options_set_rank_assignment
// (restart.h): the stock rank-assignment policies by name, and policies
// written in the caller's language as callbacks over the World's slots.
#include <memory>
#include <string>
#include <vector>

#include "resilient/restart.h"
#include "resilient/restart/errors.hpp"
#include "resilient/restart/rank_assignment.hpp"
#include "resilient/restart/tree.hpp"
#include "restart/capi/c_options.h"
#include "restart/capi/c_status.h"

namespace r = resilient::restart;
using r::capi::guarded;

struct resilient_restart_policy {
  r::RankAssignmentPtr policy;
};

namespace {

// A policy of the caller's: it edits a copy of the slots; the World takes the
// ranks and modes back (activeRank is recomputed by assignRanks).
class CallbackPolicy final : public r::RankAssignment {
 public:
  CallbackPolicy(std::string description, resilient_restart_policy_fn fn, void* user)
      : description_(std::move(description)), fn_(fn), user_(user) {}

  void apply(r::World& world, const r::AssignmentContext& context) const override {
    const int n = world.initialWorldSize();
    std::vector<resilient_restart_slot> slots(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      const r::RankSlot& s = world.at(i);
      slots[static_cast<size_t>(i)] = {s.rank, r::capi::modeToC(s.mode), s.activeRank};
    }
    r::capi::takeCallbackError();
    const int rc =
        fn_(slots.data(), n, context.terminated.data(), static_cast<int>(context.terminated.size()),
            context.firstIteration ? 1 : 0, user_);
    if (rc != 0) {
      throw r::AssignmentError("rank assignment policy " + description_ + " failed: " +
                               r::capi::callbackFailure("returned " + std::to_string(rc)));
    }
    for (int i = 0; i < n; ++i) {
      r::RankSlot& s = world.at(i);
      const resilient_restart_slot& c = slots[static_cast<size_t>(i)];
      const std::optional<r::Mode> mode = r::capi::modeFromC(c.mode);
      if (!mode || *mode == r::Mode::kInitialized) {
        throw r::AssignmentError("the policy gave initial rank " + std::to_string(i) + " mode " +
                                 std::to_string(c.mode) +
                                 ", which is not active, inactive or terminated");
      }
      if (*mode == r::Mode::kTerminated) {
        world.terminate(i);  // its rank and active rank go with it
      } else {
        s.mode = *mode;
        s.rank = c.rank;
      }
    }
  }

  std::string describe() const override { return description_; }

 private:
  std::string description_;
  resilient_restart_policy_fn fn_;
  void* user_;
};

// A Tree layer's key through the caller's callback (grown buffer on demand).
std::string treeKey(resilient_restart_layer_key_fn key, void* user, int layer, int initialRank) {
  std::string buffer(64, '\0');
  for (int attempt = 0; attempt < 2; ++attempt) {
    size_t length = 0;
    r::capi::takeCallbackError();
    const int rc = key(layer, initialRank, buffer.data(), buffer.size(), &length, user);
    if (rc != 0) {
      throw r::AssignmentError("the key of initial rank " + std::to_string(initialRank) +
                               " at layer " + std::to_string(layer) + " failed: " +
                               r::capi::callbackFailure("returned " + std::to_string(rc)));
    }
    if (length <= buffer.size()) {
      buffer.resize(length);
      return buffer;
    }
    buffer.assign(length, '\0');
  }
  throw r::AssignmentError("the key of initial rank " + std::to_string(initialRank) + " at layer " +
                           std::to_string(layer) +
                           " grew again when asked with a buffer that fits");
}

// The policies of a C list as one (none: the default), as the loop takes them.
r::RankAssignmentPtr composed(resilient_restart_policy* const* policies, size_t n,
                              const char* what) {
  if (n == 0) {
    return r::defaultRankAssignment();
  }
  std::vector<r::RankAssignmentPtr> list;
  for (size_t i = 0; i < n; ++i) {
    if (policies[i] == nullptr) {
      throw r::ConfigError(std::string(what) + ": null policy at " + std::to_string(i));
    }
    list.push_back(policies[i]->policy);
  }
  return r::compose(std::move(list));
}

r::World worldFromC(const resilient_restart_slot* slots, int n) {
  r::World world(n);
  for (int i = 0; i < n; ++i) {
    const resilient_restart_slot& c = slots[i];
    const std::optional<r::Mode> mode = r::capi::modeFromC(c.mode);
    if (!mode || *mode == r::Mode::kInitialized) {
      throw r::ConfigError("policy_apply: slot " + std::to_string(i) + " has mode " +
                           std::to_string(c.mode));
    }
    r::RankSlot& s = world.at(i);
    if (*mode == r::Mode::kTerminated) {
      world.terminate(i);
    } else {
      s.mode = *mode;
      s.rank = c.rank;
      s.activeRank = c.active_rank;
    }
  }
  if (const std::string wrong = world.inconsistency(); !wrong.empty()) {
    throw r::ConfigError("policy_apply: the previous World is inconsistent: " + wrong);
  }
  return world;
}

}  // namespace

extern "C" {

resilient_restart_policy* resilient_restart_policy_stock(const char* name, long long argument) {
  resilient_restart_policy* out = nullptr;
  guarded([&] {
    const std::string n = name != nullptr ? name : "";
    const auto needPositive = [&] {
      if (argument < 1 || argument > (1 << 30)) {
        throw r::ConfigError("rank assignment policy " + n + " needs a positive argument, not " +
                             std::to_string(argument));
      }
      return static_cast<int>(argument);
    };
    r::RankAssignmentPtr p;
    if (n == "shift_ranks") {
      p = r::shiftRanks();
    } else if (n == "fill_gaps") {
      p = r::fillGaps();
    } else if (n == "activate_all_ranks") {
      p = r::activateAllRanks();
    } else if (n == "max_active_world_size") {
      p = r::maxActiveWorldSize(needPositive());
    } else if (n == "active_world_size_divisible_by") {
      p = r::activeWorldSizeDivisibleBy(needPositive());
    } else {
      throw r::ConfigError("no stock rank assignment policy '" + n +
                           "' (shift_ranks, fill_gaps, activate_all_ranks, "
                           "max_active_world_size, active_world_size_divisible_by)");
    }
    out = new resilient_restart_policy{std::move(p)};
    return 0;
  });
  return out;
}

resilient_restart_policy* resilient_restart_policy_callback(const char* description,
                                                            resilient_restart_policy_fn fn,
                                                            void* user) {
  resilient_restart_policy* out = nullptr;
  guarded([&] {
    if (fn == nullptr) {
      throw r::ConfigError("policy_callback: null function");
    }
    out = new resilient_restart_policy{std::make_shared<CallbackPolicy>(
        description != nullptr && description[0] != '\0' ? description : "(callback)", fn, user)};
    return 0;
  });
  return out;
}

resilient_restart_policy* resilient_restart_policy_tree(
    const resilient_restart_layer* layers, size_t n, resilient_restart_layer_key_fn key,
    resilient_restart_world_size_filter_fn filter, void* user) {
  resilient_restart_policy* out = nullptr;
  guarded([&] {
    if (layers == nullptr || n == 0) {
      throw r::ConfigError("policy_tree: a tree needs at least its root layer");
    }
    if (key == nullptr && n > 1) {
      throw r::ConfigError("policy_tree: layers below the root need a key function");
    }
    const unsigned known = RESILIENT_RESTART_LAYER_RESERVE | RESILIENT_RESTART_LAYER_BACKFILL;
    std::vector<r::Layer> list;
    for (size_t k = 0; k < n; ++k) {
      const resilient_restart_layer& c = layers[k];
      if (c.flags < 0 || (static_cast<unsigned>(c.flags) & ~known) != 0) {
        throw r::ConfigError("policy_tree: layer " + std::to_string(k) + " has unknown flags " +
                             std::to_string(c.flags));
      }
      r::Layer l;
      l.minRanks = c.min_ranks;
      l.maxRanks = c.max_ranks;
      l.flags = ((c.flags & RESILIENT_RESTART_LAYER_RESERVE) != 0 ? r::Layer::kReserve : 0u) |
                ((c.flags & RESILIENT_RESTART_LAYER_BACKFILL) != 0 ? r::Layer::kBackfill : 0u);
      if (k > 0) {
        const int layer = static_cast<int>(k);
        l.key = [key, user, layer](int initialRank) {
          return treeKey(key, user, layer, initialRank);
        };
      }
      list.push_back(std::move(l));
    }
    std::function<int(int)> cut;
    if (filter != nullptr) {
      cut = [filter, user](int active) {
        int keep = active;
        r::capi::takeCallbackError();
        const int rc = filter(active, &keep, user);
        if (rc != 0) {
          throw r::AssignmentError("the world size filter failed: " +
                                   r::capi::callbackFailure("returned " + std::to_string(rc)));
        }
        if (keep < 0 || keep > active) {
          throw r::AssignmentError("the world size filter kept " + std::to_string(keep) + " of " +
                                   std::to_string(active) +
                                   " active ranks (at most that many, at least 0)");
        }
        return keep;
      };
    }
    out = new resilient_restart_policy{r::tree(std::move(list), std::move(cut))};
    return 0;
  });
  return out;
}

int resilient_restart_policy_apply(resilient_restart_policy* const* policies, size_t count,
                                   resilient_restart_slot* slots, int n, const int* terminated,
                                   int terminated_count, int first_iteration) {
  return guarded([&] {
    if ((policies == nullptr && count > 0) || slots == nullptr || n < 1 ||
        (terminated == nullptr && terminated_count > 0) || terminated_count < 0) {
      throw r::ConfigError("policy_apply: null policies or slots, or bad counts");
    }
    const r::RankAssignmentPtr policy = composed(policies, count, "policy_apply");
    const r::World previous = first_iteration != 0 ? r::World(n) : worldFromC(slots, n);
    r::AssignmentContext context;
    context.terminated.assign(terminated, terminated + terminated_count);
    context.firstIteration = first_iteration != 0;
    const r::World next = r::assignRanks(previous, *policy, context);
    for (int i = 0; i < n; ++i) {
      const r::RankSlot& s = next.at(i);
      slots[i] = {s.rank, r::capi::modeToC(s.mode), s.activeRank};
    }
    return 0;
  });
}

void resilient_restart_policy_destroy(resilient_restart_policy* policy) {
  delete policy;
}

int resilient_restart_options_set_rank_assignment(resilient_restart_options* o,
                                                  resilient_restart_policy* const* policies,
                                                  size_t n) {
  return guarded([&] {
    if (o == nullptr || (policies == nullptr && n > 0)) {
      throw r::ConfigError("set_rank_assignment: null options or policy list");
    }
    o->options.rankAssignment = composed(policies, n, "set_rank_assignment");
    o->rankAssignmentSet = true;
    return 0;
  });
}

}  // extern "C"
