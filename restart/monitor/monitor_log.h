// The monitor process's log: one line per event, to its log file (appended)
// or to stderr, each with the wall-clock time, the monitor's pid and its rank.
#pragma once

#include <cstdio>
#include <string>

namespace resilient::restart::monitor {

class MonitorLog {
 public:
  // path empty: stderr. Throws std::system_error when the file cannot be opened.
  MonitorLog(const std::string& path, int rank);
  ~MonitorLog();
  MonitorLog(const MonitorLog&) = delete;
  MonitorLog& operator=(const MonitorLog&) = delete;

  void write(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
  const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;
  int rank_;
  FILE* file_;
};

}  // namespace resilient::restart::monitor
