// resilient_restart_policy_* and resilient_restart_options_set_rank_assignment
// (restart.h): the stock rank-assignment policies by name, and policies
// written in the caller's language as callbacks over the World's slots.
#include <memory>
#include <string>
#include <vector>

#include "resilient/restart.h"
#include "resilient/restart/errors.hpp"
#include "resilient/restart/rank_assignment.hpp"
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
      s.mode = *mode;
      s.rank = s.mode == r::Mode::kTerminated ? -1 : c.rank;
    }
  }

  std::string describe() const override { return description_; }

 private:
  std::string description_;
  resilient_restart_policy_fn fn_;
  void* user_;
};

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
    std::vector<r::RankAssignmentPtr> list;
    for (size_t i = 0; i < n; ++i) {
      if (policies[i] == nullptr) {
        throw r::ConfigError("set_rank_assignment: null policy at " + std::to_string(i));
      }
      list.push_back(policies[i]->policy);
    }
    o->options.rankAssignment = n == 0 ? r::defaultRankAssignment() : r::compose(std::move(list));
    o->rankAssignmentSet = true;
    return 0;
  });
}

}  // extern "C"
