// The transport a host-engine tool runs on: a net plugin loaded as NCCL
// loads it (hostengine/loaded_plugin.h), or our raw TCP pump, the physical
// baseline (plugin/transport/raw/raw_transport.h).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "common/status.h"
#include "plugin/transport/raw/raw_transport.h"
#include "plugin/transport/transport.h"

namespace resilient::harness {

// `plugin`: a path, a library name or a plugin name; nullopt: the raw pump
// with `raw`. A plugin that does not load is an error naming it.
Result<std::unique_ptr<transport::Transport>> openTransport(
    const std::optional<std::string>& plugin, const transport::raw::RawTcpOptions& raw);

}  // namespace resilient::harness
