// A blackbox snapshot as JSON, and the names of its states: one rendering
// shared by resilient-inspect (--json) and the monitor process's post-mortem
// dump.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "blackbox/reader.h"

namespace resilient::blackbox {

const char* connectionStateName(uint32_t state);
const char* commStateName(uint32_t state);
const char* opStateName(uint32_t state);
// "0x00000000deadbeef"
std::string hexId(uint64_t v);

nlohmann::json opJson(const resilient_blackbox_op& op);
// The whole region: header, connections, faults, communicators with their
// flight recorders (ages relative to now when the process is alive).
nlohmann::json snapshotJson(const Snapshot& s);

}  // namespace resilient::blackbox
