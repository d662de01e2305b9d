#include "restart/monitor/post_mortem.h"

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include <nlohmann/json.hpp>

#include "blackbox/reader.h"
#include "blackbox/snapshot_json.h"
#include "common/file_replace.h"

namespace resilient::restart::monitor {

std::string postMortemPath(const std::string& logFile, const std::string& fallbackDir, int rank,
                           pid_t pid) {
  const std::filesystem::path dir = logFile.empty() ? std::filesystem::path(fallbackDir)
                                                    : std::filesystem::path(logFile).parent_path();
  const std::string name =
      "resilient-monitor-" + std::to_string(rank) + "-" + std::to_string(pid) + ".postmortem.json";
  return (dir.empty() ? std::filesystem::path(name) : dir / name).string();
}

std::string writePostMortem(const PostMortem& what, const std::string& blackboxDir,
                            const std::string& path) {
  nlohmann::json j = {
      {"rank", what.rank},   {"pid", what.pid},       {"iteration", what.iteration},
      {"phase", what.phase}, {"reason", what.reason}, {"detail", what.detail},
  };
  std::string summary;
  const std::string region = blackbox::resolveRegion(std::to_string(what.pid), blackboxDir);
  auto snap = blackbox::readRegion(region);
  if (snap.ok()) {
    const blackbox::Snapshot& s = snap.value();
    j["blackbox"] = blackbox::snapshotJson(s);
    summary = "blackbox " + region + ": " + std::to_string(s.connections.size()) +
              " connections, " + std::to_string(s.faults.size()) + " faults, " +
              std::to_string(s.comms.size()) + " communicators";
  } else {
    j["blackbox"] = nullptr;
    j["blackbox_error"] = snap.status().toString();
    summary = "no blackbox (" + snap.status().toString() + ")";
  }
  const std::string text = j.dump(2) + "\n";
  // In the blackbox directory (world-writable /dev/shm by default): a link
  // planted at the name is replaced, never followed.
  if (Status s = replaceFile(path, text); !s.ok()) {
    throw std::system_error(s.sysErrno(), std::generic_category(),
                            "cannot write the post-mortem dump " + path + ": " + s.message());
  }
  return summary;
}

}  // namespace resilient::restart::monitor
