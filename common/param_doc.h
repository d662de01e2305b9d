// docs/configuration.md, rendered from the knob registry.
#pragma once

#include <span>
#include <string>

#include "common/param_registry.h"

namespace resilient::config {

std::string renderConfigurationMarkdown(std::span<const ParamSpec> specs);

}  // namespace resilient::config
