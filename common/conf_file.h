// Parser for nccl.conf files (NCCL_CONF_FILE, ~/.nccl.conf, /etc/nccl.conf).
//
// One NAME=VALUE per line. Lines whose first non-blank character is '#' are
// comments; blank lines are skipped; spaces and tabs around the name and the
// value are trimmed; a trailing CR (CRLF files) is removed; the value is
// everything after the first '='. A name that appears twice keeps its first
// value, as NCCL's loader does (it never overwrites). Lines NCCL would ignore
// (no '=', empty or malformed name, over-long name or value) are reported as
// diagnostics with their line number and otherwise ignored.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace resilient::config {

struct ConfEntry {
  std::string name;
  std::string value;
  int line;
};

struct ConfFile {
  std::string path;
  std::vector<ConfEntry> entries;        // in file order, first occurrence of each name only
  std::vector<std::string> diagnostics;  // "path:line: reason"
};

// NCCL's limit for names and values read from a conf file.
inline constexpr size_t kMaxConfTokenLength = 1023;
// A conf file larger than this is not one (ignored, with a diagnostic).
inline constexpr size_t kMaxConfFileBytes = 1 << 20;

ConfFile parseConf(std::string_view text, std::string path);

// Reads and parses `path`, never blocking. A file that does not exist gives
// nullopt; /dev/null an empty ConfFile; anything that exists but is not a
// regular file (a FIFO, a directory, a device), is over kMaxConfFileBytes or
// cannot be read gives an empty ConfFile with a diagnostic. Diagnostics show
// the file's bytes printable (log::printable).
std::optional<ConfFile> readConf(const std::string& path);

}  // namespace resilient::config
