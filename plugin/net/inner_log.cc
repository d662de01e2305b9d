#include "plugin/net/inner_log.h"

#include <array>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <mutex>
#include <string>

#include "blackbox/writer.h"
#include "common/log.h"

namespace resilient::net::inner_log {
namespace {

// Faults and inner WARNs are rare (never per request): a mutex is fine.
std::mutex gMutex;
bool gExplained = false;
uint32_t gEpoch = 0;
std::string gSummary;
std::atomic<const blackbox::Writer*> gBox{nullptr};

// The longest summary kept: the root cause and its peer, not a whole log line.
constexpr size_t kSummaryMax = 400;

uint32_t currentEpoch() noexcept {
  const blackbox::Writer* box = gBox.load(std::memory_order_acquire);
  return box != nullptr ? box->abortEpoch() : 0;
}

// What a WARN of the inner plugin becomes: its text, then, if this process
// explained a fault in the current epoch, " [NET/Resilient: logged after
// <summary>]".
std::string annotate(std::string_view innerWarning) {
  std::string out(innerWarning);
  const uint32_t epoch = currentEpoch();
  const std::lock_guard<std::mutex> lock(gMutex);
  if (gExplained && gEpoch == epoch) {
    out += " [NET/Resilient: logged after ";
    out += gSummary;
    out += "]";
  }
  return out;
}

void logFromInner(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                  const char* fmt, ...) {
  if (level <= NCCL_LOG_NONE || level > NCCL_LOG_TRACE || fmt == nullptr) {
    return;
  }
  const auto ours = static_cast<log::Level>(level);
  if (level > NCCL_LOG_WARN && !log::enabled(ours, flags)) {
    return;  // before formatting: an inner plugin's INFO costs nothing when off
  }
  std::array<char, 2048> text{};
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(text.data(), text.size(), fmt, ap);
  va_end(ap);
  if (level == NCCL_LOG_WARN) {
    try {
      const std::string annotated = annotate(text.data());
      log::forward(ours, flags, file, line, annotated.c_str());
      return;
    } catch (...) {
      // out of memory: the inner plugin's words alone
    }
  }
  log::forward(ours, flags, file, line, text.data());
}

}  // namespace

ncclDebugLogger_t logger() noexcept {
  return &logFromInner;
}

void explained(uint32_t abortEpoch, std::string_view summary) noexcept {
  const std::lock_guard<std::mutex> lock(gMutex);
  if (gExplained && gEpoch == abortEpoch) {
    return;
  }
  try {
    gSummary.assign(summary.substr(0, kSummaryMax));
  } catch (...) {
    return;  // out of memory: the inner plugin's WARNs stay as they are
  }
  gExplained = true;
  gEpoch = abortEpoch;
}

void attach(const blackbox::Writer* box) noexcept {
  const std::lock_guard<std::mutex> lock(gMutex);
  gExplained = false;
  gBox.store(box, std::memory_order_release);
}

}  // namespace resilient::net::inner_log
