// Where `resilient-monitor` is: as given (a path, or a name looked up on
// PATH), else next to the library that holds this code (its directory, then
// ../bin, ../libexec, and monitor/ for the build tree), else on PATH.
#pragma once

#include <string>

namespace resilient::restart::monitor {

inline constexpr const char* kMonitorExecutableName = "resilient-monitor";

// The executable's path. Throws restart::RestartError naming every place
// looked at.
std::string findMonitorExecutable(const std::string& given = {});

}  // namespace resilient::restart::monitor
