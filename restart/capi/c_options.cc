// resilient_restart_options_* (restart.h).
#include "restart/capi/c_options.h"

#include <cstring>
#include <iterator>
#include <string>
#include <type_traits>

#include "resilient/restart/errors.hpp"
#include "resilient/restart/host_communicator.hpp"
#include "restart/capi/c_constants.h"
#include "restart/capi/c_status.h"
#include "restart/loop/options/option_list.h"

namespace resilient::restart::capi {

int modeToC(Mode mode) noexcept {
  switch (mode) {
    case Mode::kActive: return RESILIENT_RESTART_MODE_ACTIVE;
    case Mode::kInactive: return RESILIENT_RESTART_MODE_INACTIVE;
    case Mode::kTerminated: return RESILIENT_RESTART_MODE_TERMINATED;
    case Mode::kInitialized: break;
  }
  return RESILIENT_RESTART_MODE_INITIALIZED;
}

std::optional<Mode> modeFromC(int mode) noexcept {
  switch (mode) {
    case RESILIENT_RESTART_MODE_ACTIVE: return Mode::kActive;
    case RESILIENT_RESTART_MODE_INACTIVE: return Mode::kInactive;
    case RESILIENT_RESTART_MODE_TERMINATED: return Mode::kTerminated;
    case RESILIENT_RESTART_MODE_INITIALIZED: return Mode::kInitialized;
    default: return std::nullopt;
  }
}

State fromC(const resilient_restart_state& c) {
  State s;
  s.initialRank = c.initial_rank;
  s.initialWorldSize = c.initial_world_size;
  s.rank = c.rank;
  s.worldSize = c.world_size;
  s.activeRank = c.active_rank;
  s.activeWorldSize = c.active_world_size;
  s.iteration = c.iteration;
  s.mode = modeFromC(c.mode).value_or(Mode::kInitialized);
  if (c.fn_failed != 0) {
    s.fnException = std::make_exception_ptr(RestartError("the function failed"));
  }
  s.culprit = c.culprit != 0;
  return s;
}

resilient_restart_state toC(const State& s) noexcept {
  resilient_restart_state c{};
  c.initial_rank = s.initialRank;
  c.initial_world_size = s.initialWorldSize;
  c.rank = s.rank;
  c.world_size = s.worldSize;
  c.active_rank = s.activeRank;
  c.active_world_size = s.activeWorldSize;
  c.iteration = s.iteration;
  c.mode = modeToC(s.mode);
  c.fn_failed = s.fnException ? 1 : 0;
  c.culprit = s.culprit ? 1 : 0;
  return c;
}

namespace {

std::function<void(const State&)> wrapHook(resilient_restart_hook hook, void* user, int kind) {
  if (hook == nullptr) {
    return {};
  }
  return [hook, user, kind](const State& state) {
    const resilient_restart_state c = toC(state);
    takeCallbackError();
    const int rc = hook(&c, user);
    if (rc == 0) {
      takeCallbackError();
      return;
    }
    const std::string what = callbackFailure("the C hook returned " + std::to_string(rc) + " (" +
                                             resilient_restart_status_name(rc) + ")");
    if (rc == RESILIENT_RESTART_ABORTED) {
      throw RestartAbort(what);
    }
    if (kind == RESILIENT_RESTART_HOOK_HEALTH_CHECK) {
      if (rc == RESILIENT_RESTART_NEEDS_NEW_PROCESS) {
        throw RankNeedsNewProcess(what);
      }
      throw HealthCheckError(what);
    }
    throw RestartError(what);
  };
}

// Every option of the C API, in id order (restart/loop/options/option_list.h).
template <class T>
constexpr int kTypeOf =
    std::is_same_v<T, std::string> ? RESILIENT_RESTART_OPTION_STRING : RESILIENT_RESTART_OPTION_INT;
#define RESILIENT_OPTION_ROW(ID, name, member, knob) \
  {name, RESILIENT_RESTART_OPT_##ID, kTypeOf<decltype(Options::member)>},
#define RESILIENT_POLICY_ROW(ID, name, member) \
  {name, RESILIENT_RESTART_OPT_##ID, RESILIENT_RESTART_OPTION_INT},
constexpr resilient_restart_option_info kOptionTable[] = {
    RESILIENT_RESTART_OPTIONS(RESILIENT_OPTION_ROW, RESILIENT_POLICY_ROW)};
#undef RESILIENT_OPTION_ROW
#undef RESILIENT_POLICY_ROW

// The variable each option's default comes from (nullptr: none), row for row
// with kOptionTable.
#define RESILIENT_OPTION_KNOB(ID, name, member, knob) knobName<knob>(),
#define RESILIENT_POLICY_KNOB(ID, name, member) nullptr,
constexpr const char* kOptionKnobs[] = {
    RESILIENT_RESTART_OPTIONS(RESILIENT_OPTION_KNOB, RESILIENT_POLICY_KNOB)};
#undef RESILIENT_OPTION_KNOB
#undef RESILIENT_POLICY_KNOB
static_assert(std::size(kOptionKnobs) == std::size(kOptionTable));

// An integer option's field = `value`; `name` for the error.
template <class T>
void setInteger(T& field, long long value, const char* name) {
  if constexpr (std::is_same_v<T, Millis>) {
    field = Millis(value);
  } else if constexpr (std::is_same_v<T, bool>) {
    field = value != 0;
  } else if constexpr (std::is_same_v<T, std::string>) {
    throw InternalError(std::string("option ") + name + " is a string");
  } else {  // int, std::optional<int>
    if (value < -1 || value > (1LL << 30)) {
      throw ConfigError(std::string("option ") + name + ": " + std::to_string(value) +
                        " is out of range");
    }
    field = static_cast<int>(value);
  }
}

// An integer option's value (a policy not set: -1); `name` for the error.
template <class T>
long long integerOf(const T& field, const char* name) {
  if constexpr (std::is_same_v<T, Millis>) {
    return field.count();
  } else if constexpr (std::is_same_v<T, std::optional<int>>) {
    return field.value_or(-1);
  } else if constexpr (std::is_same_v<T, std::string>) {
    throw InternalError(std::string("option ") + name + " is a string");
  } else {
    return static_cast<long long>(field);
  }
}

// The option `id` when it has `type`; ConfigError naming it otherwise.
const resilient_restart_option_info& optionOfType(int id, int type) {
  const resilient_restart_option_info* info = resilient_restart_option_by_id(id);
  if (info == nullptr) {
    throw ConfigError("no option has id " + std::to_string(id));
  }
  if (info->type != type) {
    throw ConfigError(std::string("option ") + info->name + " is " +
                      (info->type == RESILIENT_RESTART_OPTION_INT ? "an integer" : "a string") +
                      ": set it with resilient_restart_options_set_" +
                      (info->type == RESILIENT_RESTART_OPTION_INT ? "int" : "string"));
  }
  return *info;
}

// Calls f(field, name) with the field that option `id` sets: in o->options,
// or for a policy option in *o (O: resilient_restart_options, const or not).
// InternalError for an id that is no option (optionOfType refused it before).
template <class O, class F>
void visitOption(O* o, int id, F&& f) {
  switch (id) {
#define RESILIENT_VISIT_OPTION(ID, name, member, knob) \
  case RESILIENT_RESTART_OPT_##ID:                     \
    f(o->options.member, name);                        \
    return;
#define RESILIENT_VISIT_POLICY(ID, name, member) \
  case RESILIENT_RESTART_OPT_##ID: f(o->member, name); return;
    RESILIENT_RESTART_OPTIONS(RESILIENT_VISIT_OPTION, RESILIENT_VISIT_POLICY)
#undef RESILIENT_VISIT_OPTION
#undef RESILIENT_VISIT_POLICY
    default: throw InternalError("no option has id " + std::to_string(id));
  }
}

// The string that option `id` sets (optionOfType accepted it as a string).
template <class O>
auto& stringOption(O* o, int id) {
  decltype(&o->options.storeUrl) out = nullptr;
  visitOption(o, id, [&](auto& field, const char* name) {
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(field)>, std::string>) {
      out = &field;
    } else {
      throw InternalError(std::string("option ") + name + " is no string");
    }
  });
  return *out;
}

}  // namespace

}  // namespace resilient::restart::capi

using resilient::restart::Millis;
using resilient::restart::Options;
using namespace resilient::restart::capi;

resilient::restart::Options resilient_restart_options::resolved() const {
  namespace r = resilient::restart;
  Options o = options;
  std::vector<r::RankAssignmentPtr> policies;
  if (maxActiveWorldSize) {
    policies.push_back(r::maxActiveWorldSize(*maxActiveWorldSize));
  }
  if (activeWorldSizeDivisibleBy) {
    policies.push_back(r::activeWorldSizeDivisibleBy(*activeWorldSizeDivisibleBy));
  }
  if (!policies.empty() && rankAssignmentSet) {
    throw r::ConfigError(
        "max_active_world_size / active_world_size_divisible_by and an explicit rank "
        "assignment (set_rank_assignment) were both given: put the filters in the policy list");
  }
  if (!policies.empty()) {
    policies.push_back(r::activateAllRanks());
    policies.push_back(r::shiftRanks());
    o.rankAssignment = r::compose(std::move(policies));
  }
  if (maxIterations || minWorldSize || minActiveWorldSize) {
    o.initialize = r::composeInitialize({r::retryController(maxIterations, minWorldSize.value_or(1),
                                                            minActiveWorldSize.value_or(1)),
                                         o.initialize});
  }
  return o;
}

extern "C" {

resilient_restart_options* resilient_restart_options_from_environment(void) {
  resilient_restart_options* out = nullptr;
  guarded([&] {
    out = new resilient_restart_options{Options::fromEnvironment(), {}, {}, {}, {}, {}};
    return 0;
  });
  return out;
}

void resilient_restart_options_destroy(resilient_restart_options* options) {
  delete options;
}

const resilient_restart_option_info* resilient_restart_option_by_name(const char* name) {
  if (name == nullptr) {
    return nullptr;
  }
  for (const resilient_restart_option_info& info : kOptionTable) {
    if (std::strcmp(info.name, name) == 0) {
      return &info;
    }
  }
  return nullptr;
}

const resilient_restart_option_info* resilient_restart_option_by_id(int id) {
  for (const resilient_restart_option_info& info : kOptionTable) {
    if (info.id == id) {
      return &info;
    }
  }
  return nullptr;
}

const resilient_restart_option_info* resilient_restart_option_next(
    const resilient_restart_option_info* previous) {
  return nextRow(kOptionTable, previous);
}

int resilient_restart_options_set_int(resilient_restart_options* o, int option, long long value) {
  return guarded([&] {
    if (o == nullptr) {
      throw resilient::restart::ConfigError("set_int: null options");
    }
    optionOfType(option, RESILIENT_RESTART_OPTION_INT);
    visitOption(o, option, [&](auto& field, const char* name) { setInteger(field, value, name); });
    return 0;
  });
}

int resilient_restart_options_get_int(const resilient_restart_options* o, int option,
                                      long long* value) {
  return guarded([&] {
    if (o == nullptr || value == nullptr) {
      throw resilient::restart::ConfigError("get_int: null options or value");
    }
    optionOfType(option, RESILIENT_RESTART_OPTION_INT);
    visitOption(o, option,
                [&](const auto& field, const char* name) { *value = integerOf(field, name); });
    return 0;
  });
}

int resilient_restart_options_get_string(const resilient_restart_options* o, int option,
                                         char* buffer, size_t size, size_t* length) {
  return guarded([&] {
    if (o == nullptr || length == nullptr || (buffer == nullptr && size != 0)) {
      throw resilient::restart::ConfigError(
          "get_string: null options or length, or a null buffer of size > 0");
    }
    optionOfType(option, RESILIENT_RESTART_OPTION_STRING);
    copyText(stringOption(o, option), buffer, size, length);
    return 0;
  });
}

const char* resilient_restart_option_knob(int id) {
  const resilient_restart_option_info* info = resilient_restart_option_by_id(id);
  return info == nullptr ? nullptr : kOptionKnobs[info - std::begin(kOptionTable)];
}

int resilient_restart_options_set_string(resilient_restart_options* o, int option,
                                         const char* value) {
  return guarded([&] {
    if (o == nullptr || value == nullptr) {
      throw resilient::restart::ConfigError("set_string: null options or value");
    }
    optionOfType(option, RESILIENT_RESTART_OPTION_STRING);
    stringOption(o, option) = value;
    return 0;
  });
}

int resilient_restart_options_set_hook(resilient_restart_options* o, int kind,
                                       resilient_restart_hook hook, void* user) {
  return guarded([&] {
    if (o == nullptr) {
      throw resilient::restart::ConfigError("set_hook: null options");
    }
    auto fn = resilient::restart::capi::wrapHook(hook, user, kind);
    Options& opt = o->options;
    switch (kind) {
#define RESILIENT_SET_HOOK(ID, name, member) \
  case RESILIENT_RESTART_HOOK_##ID:          \
    opt.member = fn;                         \
    break;
      RESILIENT_RESTART_HOOKS(RESILIENT_SET_HOOK)
#undef RESILIENT_SET_HOOK
      default:
        throw resilient::restart::ConfigError("set_hook: no hook kind " + std::to_string(kind));
    }
    return 0;
  });
}

int resilient_restart_options_add_host_communicator(resilient_restart_options* o, const char* name,
                                                    const char* plugin) {
  return guarded([&] {
    if (o == nullptr || name == nullptr) {
      throw resilient::restart::ConfigError("add_host_communicator: null options or name");
    }
    resilient::restart::HostCommunicatorOptions host;
    if (plugin != nullptr) {
      host.plugin = plugin;
    }
    o->options.communicators.emplace_back(name, resilient::restart::hostCommunicatorFactory(host));
    return 0;
  });
}

}  // extern "C"
