// Opening a region file in a directory other users may write (the default,
// /dev/shm, is world-writable): never through a symbolic link, never
// blocking (a FIFO planted at the name is refused at once), and, for the
// writer, only a regular file of our own with one link -- so that a name
// planted by someone else can neither make us truncate and overwrite another
// file nor hand us a region we did not create.
//
// Threads: any; no state.
#pragma once

#include <string>

#include "common/file_descriptor.h"
#include "common/status.h"

namespace resilient::blackbox {

// Opens an existing region file to read it (or, `writable`, to set its
// control word): no link followed, no blocking; an error naming the path
// when it is not a regular file.
Result<FileDescriptor> openRegionFile(const std::string& path, bool writable);

// The writer's side. Creates `path` exclusively (mode 0600, no link
// followed): *created is then true. When the name exists, opens it instead
// if it is a regular file of this user with one link (*created false: the
// caller decides, under its lock, whether it is its own region to attach to
// or a stale one to replace); anything else is refused with the reason.
Result<FileDescriptor> createOrOpenOwnRegion(const std::string& path, bool* created);

// Whether `path` still names the file open as `fd` (not replaced or removed
// since it was opened).
bool stillNamed(const std::string& path, int fd);

}  // namespace resilient::blackbox
