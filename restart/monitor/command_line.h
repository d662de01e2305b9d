// `resilient-monitor`'s command line (CLI11): parsed into a MonitorConfig and
// validated (monitor_config.h), with "{rank}" expanded in the paths.
#pragma once

#include <stdexcept>
#include <string>

#include "restart/monitor/monitor_config.h"

namespace resilient::restart::monitor {

// Parsing stopped: --help (exitCode 0, what() is the help text) or a bad
// argument (exitCode 2, what() names it and the rule it breaks).
class CommandLineExit : public std::runtime_error {
 public:
  CommandLineExit(int exitCode, const std::string& text)
      : std::runtime_error(text), exitCode_(exitCode) {}
  int exitCode() const noexcept { return exitCode_; }

 private:
  int exitCode_;
};

inline constexpr int kBadArgumentsExit = 2;

// Throws CommandLineExit.
MonitorConfig parseCommandLine(int argc, const char* const* argv);

}  // namespace resilient::restart::monitor
