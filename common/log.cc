#include "common/log.h"

#include <strings.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>
#include <string>

namespace resilient::log {
namespace {

std::atomic<ncclDebugLogger_t> gNcclLogger{nullptr};
std::atomic<int> gRank{-1};
std::atomic<int64_t> gWarnIntervalMs{10000};

struct SubsysName {
  const char* name;
  unsigned long bit;
};
constexpr std::array<SubsysName, 19> kSubsystems{{
    {"INIT", NCCL_INIT},
    {"COLL", NCCL_COLL},
    {"P2P", NCCL_P2P},
    {"SHM", NCCL_SHM},
    {"NET", NCCL_NET},
    {"GRAPH", NCCL_GRAPH},
    {"TUNING", NCCL_TUNING},
    {"ENV", NCCL_ENV},
    {"ALLOC", NCCL_ALLOC},
    {"CALL", NCCL_CALL},
    {"PROXY", NCCL_PROXY},
    {"NVLS", NCCL_NVLS},
    {"BOOTSTRAP", NCCL_BOOTSTRAP},
    {"REG", NCCL_REG},
    {"PROFILE", NCCL_PROFILE},
    {"RAS", NCCL_RAS},
    {"RESTART", kRestart},
    {"STORE", kStore},
    {"ALL", ~0ul},
}};

const char* levelName(Level level) {
  switch (level) {
    case Level::kNone: return "NONE";
    case Level::kVersion: return "VERSION";
    case Level::kWarn: return "WARN";
    case Level::kInfo: return "INFO";
    case Level::kAbort: return "ABORT";
    case Level::kTrace: return "TRACE";
  }
  return "?";
}

// "NET/Resilient", after NCCL's own "NET/IB", "NET/Socket" convention.
const char* prefixFor(unsigned long subsys) {
  if (subsys == ~0ul) {
    return "Resilient";
  }
  if ((subsys & NCCL_NET) != 0) {
    return "NET/Resilient";
  }
  if ((subsys & NCCL_PROFILE) != 0) {
    return "PROFILER/Resilient";
  }
  if ((subsys & kStore) != 0) {
    return "STORE/Resilient";
  }
  if ((subsys & kRestart) != 0) {
    return "RESTART/Resilient";
  }
  return "Resilient";
}

void writeStderr(Level level, const char* prefix, const char* message) {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  tm utc{};
  gmtime_r(&ts.tv_sec, &utc);
  std::array<char, 32> when{};
  strftime(when.data(), when.size(), "%Y-%m-%dT%H:%M:%S", &utc);

  std::array<char, 32> rank{};
  const int r = gRank.load(std::memory_order_relaxed);
  if (r >= 0) {
    snprintf(rank.data(), rank.size(), " [%d]", r);
  }
  std::array<char, 4096> line{};
  int n = snprintf(line.data(), line.size(), "%s.%06ldZ %s:%d:%d%s RESILIENT %s %s: %s\n",
                   when.data(), ts.tv_nsec / 1000, hostName().c_str(), static_cast<int>(getpid()),
                   static_cast<int>(gettid()), rank.data(), levelName(level), prefix, message);
  if (n < 0) {
    return;
  }
  size_t len = static_cast<size_t>(n);
  if (len >= line.size()) {  // truncated: keep the newline
    len = line.size() - 1;
    line[len - 1] = '\n';
  }
  // One write(2) per line so that lines of concurrent threads do not interleave.
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), len);
  (void)ignored;
}

void emit(Level level, unsigned long subsys, const char* file, int line, const char* message) {
  const char* prefix = prefixFor(subsys);
  ncclDebugLogger_t logger = gNcclLogger.load(std::memory_order_acquire);
  if (logger != nullptr) {
    // NCCL's convention: WARN is logged for all subsystems.
    const unsigned long flags =
        level <= Level::kWarn ? static_cast<unsigned long>(NCCL_ALL) : subsys;
    logger(static_cast<ncclDebugLogLevel>(level), flags, file, line, "%s: %s", prefix, message);
    return;
  }
  writeStderr(level, prefix, message);
}

void vwrite(Level level, unsigned long subsys, const char* file, int line, uint64_t suppressed,
            const char* fmt, va_list ap) {
  std::array<char, 2048> buf{};
  int n = vsnprintf(buf.data(), buf.size(), fmt, ap);
  if (n < 0) {
    return;
  }
  if (suppressed > 0) {
    size_t used = std::min(static_cast<size_t>(n), buf.size() - 1);
    snprintf(buf.data() + used, buf.size() - used, " (%llu similar messages suppressed)",
             static_cast<unsigned long long>(suppressed));
  }
  emit(level, subsys, file, line, buf.data());
}

}  // namespace

void configure(Level level, unsigned long subsysMask) noexcept {
  detail::gLevel.store(static_cast<int>(level), std::memory_order_relaxed);
  detail::gMask.store(subsysMask, std::memory_order_relaxed);
}

Level level() noexcept {
  return static_cast<Level>(detail::gLevel.load(std::memory_order_relaxed));
}
unsigned long subsystemMask() noexcept {
  return detail::gMask.load(std::memory_order_relaxed);
}

void setWarnIntervalMs(int64_t ms) noexcept {
  gWarnIntervalMs.store(ms, std::memory_order_relaxed);
}
void setNcclLogger(ncclDebugLogger_t logger) noexcept {
  gNcclLogger.store(logger, std::memory_order_release);
}
void setRank(int rank) noexcept {
  gRank.store(rank, std::memory_order_relaxed);
}

void write(Level level, unsigned long subsys, const char* file, int line, const char* fmt,
           ...) noexcept {
  va_list ap;
  va_start(ap, fmt);
  vwrite(level, subsys, file, line, 0, fmt, ap);
  va_end(ap);
}

void writeSuppressed(Level level, unsigned long subsys, const char* file, int line,
                     uint64_t suppressed, const char* fmt, ...) noexcept {
  va_list ap;
  va_start(ap, fmt);
  vwrite(level, subsys, file, line, suppressed, fmt, ap);
  va_end(ap);
}

void forward(Level level, unsigned long flags, const char* file, int line,
             const char* message) noexcept {
  ncclDebugLogger_t logger = gNcclLogger.load(std::memory_order_acquire);
  if (logger != nullptr) {
    logger(static_cast<ncclDebugLogLevel>(level), flags, file, line, "%s", message);
    return;
  }
  writeStderr(level, "inner", message);
}

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto b = static_cast<unsigned char>(c);
    if (b >= 0x20 && b < 0x7f) {
      out += c;
    } else {
      char esc[5];
      std::snprintf(esc, sizeof esc, "\\x%02x", b);
      out += esc;
    }
  }
  return out;
}

std::optional<Level> parseLevel(std::string_view text) noexcept {
  for (Level l :
       {Level::kNone, Level::kVersion, Level::kWarn, Level::kInfo, Level::kAbort, Level::kTrace}) {
    const char* name = levelName(l);
    if (text.size() == strlen(name) && strncasecmp(text.data(), name, text.size()) == 0) {
      return l;
    }
  }
  return std::nullopt;
}

std::optional<unsigned long> parseSubsystems(std::string_view text) noexcept {
  bool invert = false;
  if (!text.empty() && text.front() == '^') {
    invert = true;
    text.remove_prefix(1);
  }
  unsigned long mask = 0;
  while (true) {
    const size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    bool found = false;
    for (const SubsysName& s : kSubsystems) {
      if (item.size() == strlen(s.name) && strncasecmp(item.data(), s.name, item.size()) == 0) {
        mask |= s.bit;
        found = true;
        break;
      }
    }
    if (!found) {
      return std::nullopt;
    }
    if (comma == std::string_view::npos) {
      break;
    }
    text.remove_prefix(comma + 1);
  }
  return invert ? ~mask : mask;
}

bool RateLimiter::allow(uint64_t nowNs, uint64_t* suppressed) noexcept {
  const int64_t intervalMs = gWarnIntervalMs.load(std::memory_order_relaxed);
  uint64_t next = nextNs_.load(std::memory_order_relaxed);
  if (nowNs < next) {
    suppressed_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  const uint64_t intervalNs = static_cast<uint64_t>(intervalMs) * 1000000ull;
  if (!nextNs_.compare_exchange_strong(next, nowNs + intervalNs, std::memory_order_relaxed)) {
    suppressed_.fetch_add(1, std::memory_order_relaxed);  // another thread won this interval
    return false;
  }
  *suppressed = suppressed_.exchange(0, std::memory_order_relaxed);
  return true;
}

const std::string& hostName() {
  static std::once_flag once;
  static std::string host;
  std::call_once(once, [] {
    std::array<char, 256> buf{};
    if (gethostname(buf.data(), buf.size() - 1) != 0) {
      host = "unknown-host";
    } else {
      host = buf.data();
    }
  });
  return host;
}

}  // namespace resilient::log
