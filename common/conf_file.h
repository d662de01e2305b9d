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

ConfFile parseConf(std::string_view text, std::string path);

// Reads and parses `path`. A file that does not exist gives nullopt; a file
// that exists but cannot be read gives an empty ConfFile with a diagnostic.
std::optional<ConfFile> readConf(const std::string& path);

}  // namespace resilient::config
