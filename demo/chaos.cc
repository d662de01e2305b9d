#include "chaos.h"

#include <signal.h>
#include <time.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace resilient::demo {
namespace {

struct Plan {
  bool victim = false;
  std::string kind;  // "" when no chaos
  ChaosPhase phase = ChaosPhase::kStartup;
  int delayMs = 100;  // the delay kind's extra compute time per step
};

Plan gPlan;
std::atomic<unsigned> gFired{0};  // one bit per phase

const char* phaseName(ChaosPhase p) {
  switch (p) {
    case ChaosPhase::kStartup: return "startup";
    case ChaosPhase::kSteady: return "steady";
    case ChaosPhase::kRecoveryBarrier: return "recovery-barrier";
    case ChaosPhase::kRecoveryComms: return "recovery-comms";
    case ChaosPhase::kCompletion: return "completion";
  }
  return "?";
}

const char* hookName(ChaosHook h) {
  switch (h) {
    case ChaosHook::kInitialize: return "hook-initialize";
    case ChaosHook::kHealth: return "hook-health";
    case ChaosHook::kFinalize: return "hook-finalize";
    case ChaosHook::kAbort: return "hook-abort";
    case ChaosHook::kCompletion: return "hook-completion";
  }
  return "?";
}

uint64_t nowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

// The marker line the driver acts on.
void mark(ChaosPhase phase, int iteration) {
  std::printf("chaos phase=%s iteration=%d kind=%s mono_ns=%llu\n", phaseName(phase), iteration,
              gPlan.kind.c_str(), static_cast<unsigned long long>(nowNs()));
  std::fflush(stdout);
}

// The phases a fault of this plan may fire in: its own, once.
bool due(ChaosPhase phase) {
  if (!gPlan.victim || phase != gPlan.phase) {
    return false;
  }
  const unsigned bit = 1u << static_cast<unsigned>(phase);
  return (gFired.fetch_or(bit) & bit) == 0;
}

volatile sig_atomic_t gPoisoned = 0;

void onPoison(int /*sig*/) {
  gPoisoned = 1;
}

}  // namespace

bool chaosPoisoned() {
  return gPoisoned != 0;
}

void chaosConfigure(int initialRank) {
  struct sigaction poison {};
  poison.sa_handler = onPoison;
  sigaction(SIGUSR1, &poison, nullptr);
  const char* spec = std::getenv("RESILIENT_DEMO_CHAOS");       // NOLINT(concurrency-mt-unsafe)
  const char* rank = std::getenv("RESILIENT_DEMO_CHAOS_RANK");  // NOLINT(concurrency-mt-unsafe)
  if (spec == nullptr || *spec == '\0') {
    return;
  }
  const std::string s(spec);
  const size_t at = s.find('@');
  if (at == std::string::npos || rank == nullptr) {
    throw std::invalid_argument(
        "RESILIENT_DEMO_CHAOS=<kind>@<phase> needs RESILIENT_DEMO_CHAOS_RANK as well");
  }
  const std::string phase = s.substr(at + 1);
  bool known = false;
  for (const ChaosPhase p :
       {ChaosPhase::kStartup, ChaosPhase::kSteady, ChaosPhase::kRecoveryBarrier,
        ChaosPhase::kRecoveryComms, ChaosPhase::kCompletion}) {
    if (phase == phaseName(p)) {
      gPlan.phase = p;
      known = true;
    }
  }
  if (!known) {
    throw std::invalid_argument("RESILIENT_DEMO_CHAOS: unknown phase '" + phase + "'");
  }
  gPlan.kind = s.substr(0, at);
  gPlan.victim = std::atoi(rank) == initialRank;
  if (gPlan.kind == "delay") {
    if (gPlan.phase != ChaosPhase::kStartup && gPlan.phase != ChaosPhase::kSteady) {
      throw std::invalid_argument("RESILIENT_DEMO_CHAOS: delay applies from startup or steady");
    }
    if (const char* ms =
            std::getenv("RESILIENT_DEMO_CHAOS_DELAY_MS")) {  // NOLINT(concurrency-mt-unsafe)
      char* end = nullptr;
      const long v = std::strtol(ms, &end, 10);
      if (end == ms || *end != '\0' || v < 0 || v > 600000) {
        throw std::invalid_argument(std::string("RESILIENT_DEMO_CHAOS_DELAY_MS: '") + ms +
                                    "' is not a number of ms in [0, 600000]");
      }
      gPlan.delayMs = static_cast<int>(v);
    }
  }
}

int chaosStepDelayMs(int done, int iteration) {
  if (!gPlan.victim || gPlan.kind != "delay") {
    return 0;
  }
  if (gPlan.phase == ChaosPhase::kSteady && iteration == 0 && done <= kSteadyStep) {
    return 0;
  }
  return gPlan.delayMs;
}

void chaosAt(ChaosPhase phase, int iteration) {
  if (!due(phase)) {
    return;
  }
  mark(phase, iteration);
  if (gPlan.kind == "sigkill") {
    ::raise(SIGKILL);
  } else if (gPlan.kind == "sigstop") {
    ::raise(SIGSTOP);
  } else if (gPlan.kind == "exception") {
    throw std::runtime_error(std::string("chaos: an exception in phase ") + phaseName(phase));
  }
  // Any other kind is the driver's (it reads the marker) or a hook's.
}

void chaosInHook(ChaosHook hook, ChaosPhase phase, int iteration) {
  if (!gPlan.victim || gPlan.kind != hookName(hook) || phase != gPlan.phase) {
    return;
  }
  const unsigned bit = 1u << (8 + static_cast<unsigned>(hook));
  if ((gFired.fetch_or(bit) & bit) != 0) {
    return;
  }
  mark(phase, iteration);
  throw std::runtime_error(std::string("chaos: the ") + hookName(hook) + " hook fails in phase " +
                           phaseName(phase));
}

}  // namespace resilient::demo
