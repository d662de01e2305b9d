// Installs the profiler plugin's test parts (fake clock, capturing sink, no
// background thread; optionally a blackbox in a temporary directory) for the
// plugin the next ncclProfiler_vN init creates, and removes them again.
#pragma once

#include <optional>
#include <string>

#include "capture_sink.h"
#include "fake_clock.h"
#include "plugin/profiler/plugin.h"

namespace resilient::test {

struct ScopeOptions {
  bool enabled = true;  // NCCL_RESILIENT_PROFILER
  int64_t collTimeoutMs = 1000;
  uint32_t opsPerContext = 256;
  bool proxySteps = true;
  std::string blackboxDir;  // empty: no blackbox
  uint32_t flightOps = 64;
};

class PluginScope {
 public:
  explicit PluginScope(const ScopeOptions& o = {}) {
    profiler::PluginParts parts;
    parts.options.enabled = o.enabled;
    parts.options.collTimeoutMs = o.collTimeoutMs;
    parts.options.tracker.opsPerContext = o.opsPerContext;
    parts.options.tracker.proxySteps = o.proxySteps;
    parts.options.blackboxDir = o.blackboxDir;
    parts.options.flightOps = o.flightOps;
    parts.options.host = "testhost";
    parts.clock = &clock;
    parts.observer = &sink;
    parts.backgroundThread = false;
    profiler::Plugin::setPartsForTesting(parts);
  }
  ~PluginScope() { profiler::Plugin::setPartsForTesting(std::nullopt); }
  PluginScope(const PluginScope&) = delete;
  PluginScope& operator=(const PluginScope&) = delete;

  static profiler::Plugin* plugin() { return profiler::Plugin::live(); }
  // One detector pass at the fake clock's time.
  void scan() {
    if (auto* p = plugin()) {
      p->detector().scan(clock.monoNs());
    }
  }

  FakeClock clock;
  CaptureSink sink;
};

}  // namespace resilient::test
