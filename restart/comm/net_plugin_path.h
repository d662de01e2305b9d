// Where the host communicator finds the net plugin when it is not told.
#pragma once

#include <string>
#include <vector>

namespace resilient::restart::comm {

inline constexpr const char* kNetPluginFile = "libnccl-net-resilient.so";

// Candidates in order: next to the file that holds the restart library's
// code, this build's plugin, the installed one. Only existing files.
std::vector<std::string> netPluginCandidates();

// The first candidate, or kNetPluginFile (left to the dynamic loader's
// search path) when none exists.
std::string defaultNetPlugin();

}  // namespace resilient::restart::comm
