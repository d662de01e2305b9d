// Where the host communicator finds the net plugin when it is not told.
#pragma once

#include <string>

namespace resilient::restart::comm {

inline constexpr const char* kNetPluginFile = "libnccl-net-resilient.so";

// The plugin beside the file that holds the restart library's code when it
// exists (the installed layout; the build tree links it there too), else
// kNetPluginFile, left to the dynamic loader's search path.
std::string defaultNetPlugin();

}  // namespace resilient::restart::comm
