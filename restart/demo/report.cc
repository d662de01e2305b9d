#include "report.h"

#include <unistd.h>

#include <cstdio>
#include <sstream>
#include <stdexcept>

namespace resilient::demo {

namespace {

std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      char escape[8];
      std::snprintf(escape, sizeof escape, "\\u%04x", c);
      out += escape;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

}  // namespace

void writeReport(const std::string& path, const RankReport& report) {
  std::ostringstream j;
  j << "{\"rank\": " << report.rank << ", \"pid\": " << ::getpid()
    << ", \"outcome\": " << quoted(report.outcome) << ", \"message\": " << quoted(report.message)
    << ", \"final_state\": " << quoted(report.finalState) << ",\n \"timeline\": [";
  const char* sep = "\n  ";
  for (const restart::TimelineEvent& e : report.timeline) {
    j << sep << "{\"iteration\": " << e.iteration << ", \"phase\": " << quoted(e.phase)
      << ", \"mono_ns\": " << e.monoNs << ", \"wall_ns\": " << e.wallNs
      << ", \"detail\": " << quoted(e.detail) << "}";
    sep = ",\n  ";
  }
  j << "],\n \"events\": [";
  sep = "\n  ";
  for (const TrainerEvent& e : report.events) {
    j << sep << "{\"iteration\": " << e.iteration << ", \"event\": " << quoted(e.event)
      << ", \"step\": " << e.step << ", \"mono_ns\": " << e.monoNs << "}";
    sep = ",\n  ";
  }
  j << "]}\n";
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) {
    throw std::runtime_error("cannot create " + tmp);
  }
  const std::string text = j.str();
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    throw std::runtime_error("cannot write " + path);
  }
}

}  // namespace resilient::demo
