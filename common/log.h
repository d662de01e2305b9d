// Logging facade shared by the plugins and the restart library.
//
// printf-style macros with NCCL's levels and subsystem flags. The level and
// subsystem test happens before any argument is formatted. The sink is NCCL's
// logger once a plugin init hands it over (setNcclLogger), otherwise stderr
// with a timestamp, host, pid, thread and rank. Nothing here runs at load
// time: every global is constant-initialised.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "nccl/log.h"

namespace resilient::log {

enum class Level : int {
  kNone = NCCL_LOG_NONE,
  kVersion = NCCL_LOG_VERSION,
  kWarn = NCCL_LOG_WARN,
  kInfo = NCCL_LOG_INFO,
  kAbort = NCCL_LOG_ABORT,
  kTrace = NCCL_LOG_TRACE,
};

// Our own subsystems, above NCCL's 16 bits (NCCL_ALL still covers them).
inline constexpr unsigned long kRestart = 1ul << 20;
inline constexpr unsigned long kStore = 1ul << 21;

namespace detail {
inline std::atomic<int> gLevel{static_cast<int>(Level::kWarn)};
inline std::atomic<unsigned long> gMask{~0ul};
}  // namespace detail

// This host's name (gethostname, read once; "unknown-host" if it fails).
const std::string& hostName();

// True when a message of this level and subsystem would be written. WARN and
// below ignore the subsystem mask, as NCCL's logger does for WARN.
inline bool enabled(Level level, unsigned long subsys) noexcept {
  const int lv = static_cast<int>(level);
  if (lv > detail::gLevel.load(std::memory_order_relaxed)) {
    return false;
  }
  return level <= Level::kWarn || (subsys & detail::gMask.load(std::memory_order_relaxed)) != 0;
}

void configure(Level level, unsigned long subsysMask) noexcept;
Level level() noexcept;
unsigned long subsystemMask() noexcept;

// The interval of RateLimiter (0: no rate limit).
void setWarnIntervalMs(int64_t ms) noexcept;

// Route messages to NCCL's logger (nullptr: back to stderr).
void setNcclLogger(ncclDebugLogger_t logger) noexcept;
// Rank shown by the stderr sink; -1 when unknown.
void setRank(int rank) noexcept;

// Formats and writes one message. Prefer the macros below.
void write(Level level, unsigned long subsys, const char* file, int line, const char* fmt,
           ...) noexcept __attribute__((format(printf, 5, 6)));
// As write(), followed by "(N similar messages suppressed)" when N > 0.
void writeSuppressed(Level level, unsigned long subsys, const char* file, int line,
                     uint64_t suppressed, const char* fmt, ...) noexcept
    __attribute__((format(printf, 6, 7)));

// Writes a message another component formatted (an inner net plugin's), as
// it is: to NCCL's logger with the component's own flags, or to stderr.
void forward(Level level, unsigned long flags, const char* file, int line,
             const char* message) noexcept;

// `text` as a log line may show it: printable ASCII as is, every other byte
// as \xNN (a binary conf file or a hostile peer must not write control bytes
// into a terminal or a log).
std::string printable(std::string_view text);

// NCCL_DEBUG / NCCL_DEBUG_SUBSYS syntax: a level name ("WARN", case-insensitive) and
// a comma list of subsystem names where a leading '^' excludes them.
std::optional<Level> parseLevel(std::string_view text) noexcept;
std::optional<unsigned long> parseSubsystems(std::string_view text) noexcept;

// Lets one warning through per interval and counts the ones it held back, so a
// fault seen on every call of the data path is reported without flooding.
class RateLimiter {
 public:
  // Returns true when the caller may log now; *suppressed is then the number of
  // messages dropped since the last one that went through.
  bool allow(uint64_t nowNs, uint64_t* suppressed) noexcept;

 private:
  std::atomic<uint64_t> nextNs_{0};
  std::atomic<uint64_t> suppressed_{0};
};

}  // namespace resilient::log

#define RES_LOG(level, subsys, ...)                                                \
  do {                                                                             \
    if (::resilient::log::enabled((level), (subsys))) {                            \
      ::resilient::log::write((level), (subsys), __FILE__, __LINE__, __VA_ARGS__); \
    }                                                                              \
  } while (0)

#define RES_WARN(subsys, ...) RES_LOG(::resilient::log::Level::kWarn, (subsys), __VA_ARGS__)
#define RES_INFO(subsys, ...) RES_LOG(::resilient::log::Level::kInfo, (subsys), __VA_ARGS__)
#if defined(RESILIENT_TRACE) && RESILIENT_TRACE
#define RES_TRACE(subsys, ...) RES_LOG(::resilient::log::Level::kTrace, (subsys), __VA_ARGS__)
#else
#define RES_TRACE(subsys, ...) \
  do {                         \
  } while (0)
#endif

// A WARN that goes through `limiter` (a RateLimiter) at most once per interval
// and says how many similar messages were held back.
#define RES_WARN_LIMITED(limiter, nowNs, subsys, ...)                                       \
  do {                                                                                      \
    uint64_t res_suppressed_ = 0;                                                           \
    if (::resilient::log::enabled(::resilient::log::Level::kWarn, (subsys)) &&              \
        (limiter).allow((nowNs), &res_suppressed_)) {                                       \
      ::resilient::log::writeSuppressed(::resilient::log::Level::kWarn, (subsys), __FILE__, \
                                        __LINE__, res_suppressed_, __VA_ARGS__);            \
    }                                                                                       \
  } while (0)
