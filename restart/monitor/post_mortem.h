// The post-mortem dump a monitor writes after its rank died: what the
// monitor knew (rank, pid, iteration, phase, why it ended) and the rank's
// blackbox region as resilient-inspect --json renders it
// (blackbox/snapshot_json.h), or why there was none.
#pragma once

#include <sys/types.h>

#include <string>

namespace resilient::restart::monitor {

struct PostMortem {
  int rank = -1;
  pid_t pid = 0;
  int iteration = 0;
  std::string phase;
  std::string reason;  // a FaultReason name
  std::string detail;
};

// "<dir of logFile>/resilient-monitor-<rank>-<pid>.postmortem.json"; without
// a log file, the same name in `fallbackDir`.
std::string postMortemPath(const std::string& logFile, const std::string& fallbackDir, int rank,
                           pid_t pid);

// Reads the region of `what.pid` in `blackboxDir` and writes the dump to
// `path`. Returns a one-line summary of what the dump holds. Throws
// std::system_error when the file cannot be written.
std::string writePostMortem(const PostMortem& what, const std::string& blackboxDir,
                            const std::string& path);

}  // namespace resilient::restart::monitor
