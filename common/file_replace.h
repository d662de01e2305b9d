// Writing a whole file safely, also in a directory others may write: the bytes
// go to a fresh temporary file beside it (created exclusively, no link
// followed) that is then renamed over the name. A reader sees the old file or
// the new one, never half of one, and a symbolic link planted at the name is
// replaced, never followed: no other file is truncated or overwritten.
//
// Threads: any; temporary names are unique per process and call.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

#include "common/status.h"

namespace resilient {

Status replaceFile(const std::string& path, std::string_view bytes, mode_t mode = 0644);

}  // namespace resilient
