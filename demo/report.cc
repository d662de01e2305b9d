#include "report.h"

#include <unistd.h>

#include <cstdio>
#include <stdexcept>

#include <nlohmann/json.hpp>

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
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) {
    throw std::runtime_error("cannot create " + tmp);
  }
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    throw std::runtime_error("cannot write " + path);
  }
}

}  // namespace resilient::demo
