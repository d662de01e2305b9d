#include "plugin/common/param_registry.h"

#include <array>

#include "plugin/common/log.h"

namespace resilient::config {
namespace {

bool validSubsystems(std::string_view text) {
  return log::parseSubsystems(text).has_value();
}

constexpr auto kRegistry = std::to_array<ParamSpec>({
    {
        .id = static_cast<int>(Param::kLogLevel),
        .name = "NCCL_RESILIENT_LOG_LEVEL",
        .type = ParamType::kEnum,
        .defaultValue = "WARN",
        .choices = "NONE|VERSION|WARN|INFO|ABORT|TRACE",
        .inherits = "NCCL_DEBUG",
        .doc = "Verbosity of our messages. Under NCCL they go through NCCL's logger, which "
               "also applies NCCL_DEBUG; elsewhere they go to stderr.",
    },
    {
        .id = static_cast<int>(Param::kLogSubsys),
        .name = "NCCL_RESILIENT_LOG_SUBSYS",
        .type = ParamType::kString,
        .defaultValue = "ALL",
        .inherits = "NCCL_DEBUG_SUBSYS",
        .validate = validSubsystems,
        .accepted = "comma list of INIT, COLL, P2P, SHM, NET, GRAPH, TUNING, ENV, ALLOC, CALL, "
                    "PROXY, NVLS, BOOTSTRAP, REG, PROFILE, RAS, RESTART, STORE or ALL; a "
                    "leading ^ excludes the listed ones",
        .doc = "Subsystems whose INFO and TRACE messages are written (WARN always is).",
    },
    {
        .id = static_cast<int>(Param::kWarnIntervalMs),
        .name = "NCCL_RESILIENT_WARN_INTERVAL_MS",
        .type = ParamType::kInt,
        .defaultValue = "10000",
        .min = 0,
        .max = 3600000,
        .unit = "ms",
        .doc = "Minimum interval between two repeated warnings of one kind (for instance the "
               "same failing connection); 0 logs every occurrence.",
    },
});

constexpr bool idsMatchPositions() {
  for (size_t i = 0; i < kRegistry.size(); ++i) {
    if (kRegistry[i].id != static_cast<int>(i)) {
      return false;
    }
  }
  return kRegistry.size() == static_cast<size_t>(Param::kCount);
}
static_assert(idsMatchPositions(), "kRegistry rows must follow the order of enum Param");

}  // namespace

std::span<const ParamSpec> registry() noexcept {
  return kRegistry;
}

}  // namespace resilient::config
