// How the agent starts its child processes (the ranks, the hosted store)
// and how it describes their ends.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace resilient::run {

struct Redirects {
  int stdoutFd = -1;            // stdout onto this descriptor, or
  std::string stdoutPath;       // into this file (truncated), stderr with it
  std::string stderrPath;       // stderr appended to this file
};

// Starts `args` (the program found on PATH unless a path) with `env` (null:
// this process's), the signal mask cleared. Throws std::runtime_error.
pid_t startChild(std::vector<std::string> args, std::vector<std::string>* env,
                 const Redirects& redirects);

// "exit 3", "signal 9 (Killed)", "exit 75 (left for a new process)".
std::string describeStatus(int status);

}  // namespace resilient::run
