// The C API's options object: Options plus the settings the C API turns into
// policies and hooks when the wrapper is made.
#pragma once

#include <optional>

#include "resilient/restart.h"
#include "resilient/restart/options.hpp"

struct resilient_restart_options {
  resilient::restart::Options options;
  std::optional<int> maxActiveWorldSize;
  std::optional<int> activeWorldSizeDivisibleBy;
  std::optional<int> maxIterations;
  std::optional<int> minWorldSize;
  std::optional<int> minActiveWorldSize;
  bool rankAssignmentSet = false;  // resilient_restart_options_set_rank_assignment

  // Options with the policies and the retry controller composed in.
  resilient::restart::Options resolved() const;
};

namespace resilient::restart::capi {

// Modes and states between the C API's ints and structs and the C++ types.
int modeToC(Mode mode) noexcept;
// nullopt for a value that is no mode.
std::optional<Mode> modeFromC(int mode) noexcept;
resilient_restart_state toC(const State& state) noexcept;
// fn_failed stands for the exception (a RestartError "the function failed").
State fromC(const resilient_restart_state& state);

}  // namespace resilient::restart::capi
