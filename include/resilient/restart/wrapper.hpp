// The restart loop (docs/reference/restart-model.md §1.1–1.2): Wrapper runs a function and
// calls it again on every restart with a CallContext for that iteration.
//
//   resilient::restart::Wrapper wrapper(options);
//   double loss = wrapper.run([&](resilient::restart::CallContext& ctx) {
//     load_checkpoint();
//     for (...) { train_step(ctx.communicator("dp")); ctx.ping(); }
//     return final_loss;
//   });
//
// What the wrapped function must do (there is no asynchronous exception in
// C++): wait on communication only through calls that an abort interrupts
// (NCCL calls on non-blocking communicators the library made, the host
// communicator, CallContext::checkCancelled() in its own loops), let
// RankShouldRestart propagate, reload its state from a checkpoint on every
// call (State::iteration > 0), and write checkpoints inside atomic().
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "resilient/restart/communicator.hpp"
#include "resilient/restart/errors.hpp"
#include "resilient/restart/options.hpp"
#include "resilient/restart/state.hpp"
#include "resilient/restart/timeline.hpp"
#include "resilient/restart/visibility.h"

namespace resilient::restart {
class Loop;  // the implementation: internal, not exported
}  // namespace resilient::restart

RESILIENT_RESTART_API_BEGIN
namespace resilient::restart {

class CallContext {
 public:
  const State& state() const noexcept { return state_; }
  int iteration() const noexcept { return state_.iteration; }

  // Progress: arms the manual progress timeout on its first call, then
  // refreshes it (soft/hard timeouts count from the last ping).
  void ping() noexcept;

  // Runs `fn` in a section the abort never interrupts: an abort that begins
  // meanwhile waits for the section to end (e.g. a checkpoint write).
  template <class F>
  decltype(auto) atomic(F&& fn) {
    std::lock_guard<std::recursive_mutex> lock(atomicMutex());
    return std::forward<F>(fn)();
  }

  // The same section as begin/end calls (for the C API; prefer atomic()).
  void atomicBegin() { atomicMutex().lock(); }
  void atomicEnd() { atomicMutex().unlock(); }

  // While the returned guard lives, soft and hard timeouts do not apply to
  // this rank (e.g. a long evaluation with no progress calls).
  class HangProtectionOff {
   public:
    explicit HangProtectionOff(CallContext* ctx) noexcept : ctx_(ctx) {}
    HangProtectionOff(HangProtectionOff&& other) noexcept
        : ctx_(std::exchange(other.ctx_, nullptr)) {}
    HangProtectionOff& operator=(HangProtectionOff&&) = delete;
    HangProtectionOff(const HangProtectionOff&) = delete;
    HangProtectionOff& operator=(const HangProtectionOff&) = delete;
    ~HangProtectionOff();

   private:
    CallContext* ctx_;
  };
  [[nodiscard]] HangProtectionOff disableHangProtection() noexcept;
  // The same as begin/end calls (for the C API; nesting counts).
  void hangProtectionOff() noexcept;
  void hangProtectionOn() noexcept;

  // The rank enters (and later leaves) the next collective of `group`, in
  // which it is rank `rank` of `nranks`, where no NCCL profiler sees it (a
  // torch group over gloo, the user's own collectives): the job's health
  // comparison then finds stragglers and stuck ranks there too
  // (docs/observability.md). `group`: a name every rank of the group gives
  // alike; `function`: the collective's name, for reports.
  void enterCollective(const std::string& group, const std::string& function, int rank, int nranks);
  void leaveCollective(const std::string& group);

  // True once a restart has begun; checkCancelled() throws RankShouldRestart
  // then. Long loops of the wrapped function that make no communicator call
  // should check it.
  bool cancelled() const noexcept;
  void checkCancelled() const;

  // This iteration's communicator made by the factory of that name (throws
  // std::out_of_range for an unknown name; null on a spare).
  Communicator* communicator(const std::string& name) const;
  // The only communicator when Options has exactly one factory.
  Communicator* communicator() const;
  // A communicator of the user's: aborted with the library's ones when a
  // restart begins, forgotten at the end of the iteration.
  void registerCommunicator(CommunicatorPtr comm);

  // This iteration's rendezvous (for the user's own communicators).
  Rendezvous& rendezvous() const;

  CallContext(const CallContext&) = delete;
  CallContext& operator=(const CallContext&) = delete;

 private:
  friend class Loop;
  CallContext(Loop& loop, const State& state) : loop_(loop), state_(state) {}
  std::recursive_mutex& atomicMutex() const noexcept;

  Loop& loop_;
  const State& state_;
};

class Wrapper {
 public:
  explicit Wrapper(Options options);
  ~Wrapper();
  Wrapper(const Wrapper&) = delete;
  Wrapper& operator=(const Wrapper&) = delete;

  // Runs `fn` until one call completes on every active rank; returns that
  // call's result (a spare returns std::nullopt for non-void functions, as it
  // never ran the function to completion). Throws RestartAbort when the job
  // stops restarting, RankDiscarded when this rank leaves the job.
  void run(const std::function<void(CallContext&)>& fn);
  template <class F, class R = std::invoke_result_t<F, CallContext&>,
            class = std::enable_if_t<!std::is_void_v<R>>>
  std::optional<R> run(F&& fn) {
    std::optional<R> result;
    run(std::function<void(CallContext&)>([&](CallContext& ctx) { result.emplace(fn(ctx)); }));
    return result;
  }

  // The state of the last iteration (after run() returned or threw).
  const State& state() const noexcept;
  // What the loop did on this rank and when (for timelines and benchmarks).
  std::vector<TimelineEvent> timeline() const;

 private:
  std::unique_ptr<Loop> loop_;
};

}  // namespace resilient::restart
RESILIENT_RESTART_API_END
