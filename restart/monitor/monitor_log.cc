#include "restart/monitor/monitor_log.h"

#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <ctime>
#include <system_error>

namespace resilient::restart::monitor {

MonitorLog::MonitorLog(const std::string& path, int rank)
    : path_(path), rank_(rank), file_(stderr) {
  if (!path.empty()) {
    file_ = std::fopen(path.c_str(), "ae");
    if (file_ == nullptr) {
      throw std::system_error(errno, std::generic_category(), "cannot open the log file " + path);
    }
  }
}

MonitorLog::~MonitorLog() {
  if (file_ != stderr) {
    std::fclose(file_);
  }
}

void MonitorLog::write(const char* fmt, ...) {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  tm local{};
  localtime_r(&ts.tv_sec, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &local);
  char line[2048];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(line, sizeof line, fmt, args);
  va_end(args);
  std::fprintf(file_, "%s.%03ld resilient-monitor[%d] rank %d: %s\n", stamp, ts.tv_nsec / 1000000,
               static_cast<int>(::getpid()), rank_, line);
  std::fflush(file_);
}

}  // namespace resilient::restart::monitor
