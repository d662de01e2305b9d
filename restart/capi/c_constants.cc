// resilient_restart_constant_next (restart.h): the table of c_constants.h.
#include "restart/capi/c_constants.h"

#include <cstddef>
#include <iterator>

#include "resilient/restart.h"
#include "restart/loop/options/option_list.h"

namespace resilient::restart::capi {
namespace {

#define RESILIENT_CHECK_NAME(ID, name, ...) \
  static_assert(isNameOfId(#ID, name), "constant " name " is not named after its enumerator");
RESILIENT_RESTART_STATUSES(RESILIENT_CHECK_NAME)
RESILIENT_RESTART_MODES(RESILIENT_CHECK_NAME)
RESILIENT_RESTART_HOOKS(RESILIENT_CHECK_NAME)
RESILIENT_RESTART_OPTION_TYPES(RESILIENT_CHECK_NAME)
RESILIENT_RESTART_LAYER_FLAGS(RESILIENT_CHECK_NAME)
#undef RESILIENT_CHECK_NAME

// Every field of the structs is listed: they hold ints only.
#define RESILIENT_FIELD_NAME(name) #name,
constexpr const char* kStateFields[] = {RESILIENT_RESTART_STATE_FIELDS(RESILIENT_FIELD_NAME)};
constexpr const char* kSlotFields[] = {RESILIENT_RESTART_SLOT_FIELDS(RESILIENT_FIELD_NAME)};
constexpr const char* kLayerFields[] = {RESILIENT_RESTART_LAYER_FIELDS(RESILIENT_FIELD_NAME)};
#undef RESILIENT_FIELD_NAME
static_assert(sizeof(resilient_restart_state) == sizeof(int) * std::size(kStateFields));
static_assert(sizeof(resilient_restart_slot) == sizeof(int) * std::size(kSlotFields));
static_assert(sizeof(resilient_restart_layer) == sizeof(int) * std::size(kLayerFields));

#define RESILIENT_STATUS_ROW(ID, name, text) {"status", name, RESILIENT_RESTART_##ID},
#define RESILIENT_MODE_ROW(ID, name) {"mode", name, RESILIENT_RESTART_MODE_##ID},
#define RESILIENT_HOOK_ROW(ID, name, member) {"hook", name, RESILIENT_RESTART_HOOK_##ID},
#define RESILIENT_OPTION_TYPE_ROW(ID, name) {"option_type", name, RESILIENT_RESTART_OPTION_##ID},
#define RESILIENT_LAYER_FLAG_ROW(ID, name) {"layer_flag", name, RESILIENT_RESTART_LAYER_##ID},
#define RESILIENT_STATE_ROW(name) \
  {"state", #name, static_cast<int>(offsetof(resilient_restart_state, name))},
#define RESILIENT_SLOT_ROW(name) \
  {"slot", #name, static_cast<int>(offsetof(resilient_restart_slot, name))},
#define RESILIENT_LAYER_ROW(name) \
  {"layer", #name, static_cast<int>(offsetof(resilient_restart_layer, name))},
// clang-format off
constexpr resilient_restart_constant kConstants[] = {
    RESILIENT_RESTART_STATUSES(RESILIENT_STATUS_ROW)
    RESILIENT_RESTART_MODES(RESILIENT_MODE_ROW)
    RESILIENT_RESTART_HOOKS(RESILIENT_HOOK_ROW)
    RESILIENT_RESTART_OPTION_TYPES(RESILIENT_OPTION_TYPE_ROW)
    RESILIENT_RESTART_LAYER_FLAGS(RESILIENT_LAYER_FLAG_ROW)
    RESILIENT_RESTART_STATE_FIELDS(RESILIENT_STATE_ROW)
    RESILIENT_RESTART_SLOT_FIELDS(RESILIENT_SLOT_ROW)
    RESILIENT_RESTART_LAYER_FIELDS(RESILIENT_LAYER_ROW)
    {"size", "state", static_cast<int>(sizeof(resilient_restart_state))},
    {"size", "slot", static_cast<int>(sizeof(resilient_restart_slot))},
    {"size", "layer", static_cast<int>(sizeof(resilient_restart_layer))},
    {"size", "option_info", static_cast<int>(sizeof(resilient_restart_option_info))},
};
// clang-format on
#undef RESILIENT_STATUS_ROW
#undef RESILIENT_MODE_ROW
#undef RESILIENT_HOOK_ROW
#undef RESILIENT_OPTION_TYPE_ROW
#undef RESILIENT_LAYER_FLAG_ROW
#undef RESILIENT_STATE_ROW
#undef RESILIENT_SLOT_ROW
#undef RESILIENT_LAYER_ROW

}  // namespace
}  // namespace resilient::restart::capi

extern "C" const resilient_restart_constant* resilient_restart_constant_next(
    const resilient_restart_constant* previous) {
  return resilient::restart::capi::nextRow(resilient::restart::capi::kConstants, previous);
}
