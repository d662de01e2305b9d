// The directory of the shared object (or executable) that holds a given
// symbol: where a library finds the files installed beside it (the restart
// library's monitor executable and net plugin).
#pragma once

#include <string>

namespace resilient::dl {

// The canonical directory of the object holding `symbol` (dladdr), symlinks
// resolved; "" when it cannot be told.
std::string objectDirectory(const void* symbol);

}  // namespace resilient::dl
