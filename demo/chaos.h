// Fault injection for the reliability matrix (scripts/chaos_matrix.py,
// docs/reliability.md): one fault, at one phase of the job, on one rank.
//
//   RESILIENT_DEMO_CHAOS=<kind>@<phase>   RESILIENT_DEMO_CHAOS_RANK=<initial rank>
//
// Phases (where the rank checks, in this process):
//   startup          main, before Wrapper::run (before the initial barrier)
//   steady           the rank's step kSteadyStep of iteration 0
//   recovery-barrier the end of the rank's health check in the recovery of
//                    iteration 0: it enters the iteration barrier next
//   recovery-comms   the communicator factory of iteration 1
//   completion       the function returns in its last iteration: the rank
//                    enters the completion barrier next
// Kinds the rank acts on itself there: exception (throws), sigkill, sigstop
// (raise), and hook-initialize, hook-health, hook-finalize, hook-abort,
// hook-completion (that hook throws, in the phase where it runs), and delay
// (a straggler: from that phase on, every step of the rank computes
// RESILIENT_DEMO_CHAOS_DELAY_MS longer, default 100; startup or steady). Any other
// kind (the store's, a spare's, an etcd member's) is the driver's: the rank
// only prints the marker line, on every phase, for the driver to act on:
//   chaos phase=<phase> iteration=<k> rank=<initial rank> mono_ns=<t>
//
// Threads: the phase points run on the rank's main thread and on the
// library's hook threads, one at a time; a phase fires at most once.
#pragma once

#include <string>

namespace resilient::demo {

inline constexpr int kSteadyStep = 40;

enum class ChaosPhase { kStartup, kSteady, kRecoveryBarrier, kRecoveryComms, kCompletion };
enum class ChaosHook { kInitialize, kHealth, kFinalize, kAbort, kCompletion };

// The phase point `phase` of this rank in iteration `iteration`: prints the
// marker (the victim only) and injects the fault if it is due here.
void chaosAt(ChaosPhase phase, int iteration);
// Whether `hook` must throw now, in phase `phase` (the victim's hook-* kind).
void chaosInHook(ChaosHook hook, ChaosPhase phase, int iteration);
// The extra compute time of this rank's step `done` (1-based) in iteration
// `iteration`, in ms: the delay kind's, 0 otherwise.
int chaosStepDelayMs(int done, int iteration);
// Parses the environment once; throws std::invalid_argument on a bad value.
void chaosConfigure(int initialRank);

// A poisoned GPU context, simulated (the agent drill, scripts/agent_drill.py):
// SIGUSR1 makes the rank's next step fail as a sticky CUDA error would, and
// its health check say from then on that only a new process can go on
// (restart::RankNeedsNewProcess). chaosConfigure installs the handler.
bool chaosPoisoned();

}  // namespace resilient::demo
