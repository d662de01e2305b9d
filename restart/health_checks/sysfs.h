// Reading sysfs attributes (one value per file) under a root that tests can
// point at a fake tree. Internal to the health checks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace resilient::restart::detail {

// The file's first line without trailing whitespace; nullopt when it cannot
// be read (absent, or the kernel refuses, as `carrier` of a downed interface).
std::optional<std::string> readAttribute(const std::string& path);

// A non-negative decimal counter; nullopt when unreadable or not a number.
std::optional<int64_t> readCounter(const std::string& path);

// Names of the entries of a directory, sorted; empty when it does not exist.
std::vector<std::string> listDirectory(const std::string& path);

}  // namespace resilient::restart::detail
