#include "report.h"

#include <unistd.h>

#include <cstdio>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "common/file_replace.h"

namespace resilient::demo {

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
      {"events", events}};
  // An exception's text may hold any bytes: replace invalid UTF-8, never throw.
  const std::string text = j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  if (Status s = replaceFile(path, text); !s.ok()) {
    throw std::runtime_error(s.toString());
  }
}

}  // namespace resilient::demo
