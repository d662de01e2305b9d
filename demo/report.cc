#include "report.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "common/file_replace.h"

namespace resilient::demo {

namespace {

int entriesOf(const char* dir) {
  int n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(dir, ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return n;
}

}  // namespace

ProcessResources ProcessResources::now() {
  ProcessResources r;
  r.descriptors = entriesOf("/proc/self/fd") - 1;  // less the one that lists them
  r.threads = entriesOf("/proc/self/task");
  return r;
}

void writeReport(const std::string& path, const RankReport& report) {
  nlohmann::json events = nlohmann::json::array();
  for (const TrainerEvent& e : report.events) {
    events.push_back(
        {{"iteration", e.iteration}, {"event", e.event}, {"step", e.step}, {"mono_ns", e.monoNs}});
  }
  const nlohmann::json j = {
      {"rank", report.rank},
      {"pid", ::getpid()},
      {"outcome", report.outcome},
      {"message", report.message},
      {"final_state", report.finalState},
      {"timeline", nlohmann::json::parse(restart::timelineJson(report.timeline))},
      {"events", events},
      {"resources",
       {{"before", {{"descriptors", report.before.descriptors}, {"threads", report.before.threads}}},
        {"after", {{"descriptors", report.after.descriptors}, {"threads", report.after.threads}}}}}};
  // An exception's text may hold any bytes: replace invalid UTF-8, never throw.
  const std::string text = j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  if (Status s = replaceFile(path, text); !s.ok()) {
    throw std::runtime_error(s.toString());
  }
}

}  // namespace resilient::demo
