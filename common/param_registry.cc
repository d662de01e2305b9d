// registry(): the knobs of kAllKnobs (knobs.h) as contiguous ParamSpec rows.
#include "common/param_registry.h"

#include "common/knobs.h"

namespace resilient::config {
namespace {

constexpr auto kRegistry = [] {
  std::array<ParamSpec, kAllKnobs.size()> rows{};
  for (size_t i = 0; i < rows.size(); ++i) {
    rows[i] = *kAllKnobs[i];
  }
  return rows;
}();

}  // namespace

std::span<const ParamSpec> registry() noexcept {
  return kRegistry;
}

}  // namespace resilient::config
