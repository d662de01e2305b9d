// What the host-engine tools (resilient-nettest, resilient-net-ab) share as
// programs: their exit statuses, which their launchers read back from the
// ranks; the guard of main; files written whole or not at all.
#pragma once

#include <string>

namespace resilient::tools {

// Exit statuses of a rank, and of the launcher for the whole run.
inline constexpr int kExitOk = 0;
inline constexpr int kExitDataErrors = 1;  // wrong bytes, no fault
inline constexpr int kExitUsage = 2;       // bad command line or environment; a plugin not loaded
inline constexpr int kExitFault = 3;       // a fault (or a fault not detected in fault mode)

// Runs `run`; an exception escaping it is printed as "<tool>: what" and
// exits kExitUsage.
int guardedMain(const char* tool, int (*run)(int argc, char** argv), int argc, char** argv);

// SIGPIPE ignored: a peer's closed socket is an error to report, not death.
void ignoreSigpipe();

// `text` to `path` through path.tmp and a rename: readers see all or nothing.
void writeFileAtomically(const std::string& path, const std::string& text);

}  // namespace resilient::tools
