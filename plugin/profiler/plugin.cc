#include "plugin/profiler/plugin.h"

#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>

#include "common/log.h"
#include "common/params.h"
#include "plugin/profiler/fault_sink.h"

namespace resilient::profiler {
namespace {

// Global plugin; guarded by gMutex (control path only).
std::mutex gMutex;
Plugin* gPlugin = nullptr;
std::atomic<Plugin*> gLive{nullptr};  // == gPlugin, readable without the mutex
std::optional<PluginParts>* gTestParts = nullptr;

std::string hostName() {
  std::array<char, 256> buf{};
  if (gethostname(buf.data(), buf.size() - 1) != 0) {
    return "unknown";
  }
  return buf.data();
}

// Runs when the library is unloaded (dlclose or exit).
__attribute__((destructor)) void onUnload() {
  releaseAllOnUnload();
}

}  // namespace

PluginOptions PluginOptions::fromParams() {
  const config::Params& p = config::Params::global();
  PluginOptions o;
  o.enabled = p.get<config::kProfiler>();
  o.collTimeoutMs = p.get<config::kCollTimeoutMs>();
  o.tracker.opsPerContext = static_cast<uint32_t>(p.get<config::kProfilerOps>());
  o.tracker.proxySteps = p.get<config::kProfilerProxySteps>();
  o.blackboxDir = p.get<config::kBlackboxDir>();
  o.flightOps = static_cast<uint32_t>(p.get<config::kFlightRecorderOps>());
  o.host = hostName();
  return o;
}

Plugin::Plugin(const PluginParts& parts) : options_(parts.options), clock_(parts.clock) {
  if (!options_.enabled) {
    return;
  }
  if (clock_ == nullptr) {
    ownClock_ = std::make_unique<SystemClock>();
    clock_ = ownClock_.get();
  }
  if (!options_.blackboxDir.empty()) {
    blackbox::Layout layout;
    layout.flightOps = options_.flightOps;
    auto created = blackbox::Writer::create(options_.blackboxDir, options_.host, layout);
    if (created.ok()) {
      box_ = std::move(created).value();
    } else {
      RES_WARN(NCCL_PROFILE | NCCL_INIT, "running without a blackbox: %s",
               created.status().toString().c_str());
    }
  }
  sink_ = std::make_unique<BlackboxFaultSink>(box_.get(), parts.observer);
  tracker_ = std::make_unique<Tracker>(options_.tracker, *clock_, box_.get());
  const uint64_t timeoutNs =
      options_.collTimeoutMs > 0 ? static_cast<uint64_t>(options_.collTimeoutMs) * 1000000ull : 0;
  detector_ = std::make_unique<HangDetector>(*tracker_, timeoutNs, *sink_);
  if (parts.backgroundThread && (timeoutNs != 0 || box_ != nullptr)) {
    thread_ = std::jthread([this](const std::stop_token& stop) { run(stop); });
  }
}

Plugin::~Plugin() {
  if (thread_.joinable()) {
    thread_.request_stop();
    wake_.notify_all();
    thread_.join();
  }
  detector_.reset();
  tracker_.reset();  // finalizes what NCCL left (abandoned operations)
  sink_.reset();
  box_.reset();  // detaches; the last user removes the region
}

void Plugin::run(const std::stop_token& stop) {
  const auto interval = std::chrono::nanoseconds(detector_->intervalNs());
  std::unique_lock<std::mutex> lock(waitMutex_);
  while (!stop.stop_requested()) {
    detector_->scan(clock_->monoNs());
    wake_.wait_for(lock, stop, interval, [] { return false; });
  }
}

Plugin* Plugin::acquire(ncclDebugLogger_t logger, Status* error) {
  std::lock_guard<std::mutex> lock(gMutex);
  if (logger != nullptr) {
    log::setNcclLogger(logger);
  }
  if (gPlugin == nullptr) {
    try {
      PluginParts parts;
      if (gTestParts != nullptr && gTestParts->has_value()) {
        parts = **gTestParts;
      } else {
        parts.options = PluginOptions::fromParams();
      }
      gPlugin = new Plugin(parts);
    } catch (const std::exception& e) {
      *error = internalError(std::string("profiler: cannot start: ") + e.what());
      return nullptr;
    }
    gLive.store(gPlugin, std::memory_order_release);
    detail::gLiveTracker.store(gPlugin->enabled() ? gPlugin->tracker_.get() : nullptr,
                               std::memory_order_release);
  }
  ++gPlugin->refs_;
  return gPlugin;
}

void Plugin::release(Plugin* plugin) noexcept {
  std::lock_guard<std::mutex> lock(gMutex);
  if (plugin == nullptr || plugin != gPlugin) {
    return;
  }
  if (--plugin->refs_ == 0) {
    detail::gLiveTracker.store(nullptr, std::memory_order_release);
    gLive.store(nullptr, std::memory_order_release);
    delete plugin;
    gPlugin = nullptr;
  }
}

Plugin* Plugin::live() noexcept {
  return gLive.load(std::memory_order_acquire);
}

void Plugin::setPartsForTesting(std::optional<PluginParts> parts) {
  std::lock_guard<std::mutex> lock(gMutex);
  static std::optional<PluginParts> storage;
  storage = std::move(parts);
  gTestParts = &storage;
}

void releaseAllOnUnload() noexcept {
  std::lock_guard<std::mutex> lock(gMutex);
  if (gPlugin != nullptr) {
    detail::gLiveTracker.store(nullptr, std::memory_order_release);
    gLive.store(nullptr, std::memory_order_release);
    delete gPlugin;
    gPlugin = nullptr;
  }
}

}  // namespace resilient::profiler
