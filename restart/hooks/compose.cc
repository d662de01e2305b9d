// composeX(): the reference's Compose for each kind of hook. The last hook in
// the list runs first; empty functions are dropped when the chain is built.
#include <exception>
#include <utility>
#include <vector>

#include "resilient/restart/hooks.hpp"

namespace resilient::restart {
namespace {

// Keeps the non-empty hooks in the order they will run (last given, first run).
template <typename Fn>
std::vector<Fn> runOrder(std::vector<Fn> hooks) {
  std::vector<Fn> order;
  order.reserve(hooks.size());
  for (auto it = hooks.rbegin(); it != hooks.rend(); ++it) {
    if (*it) {
      order.push_back(std::move(*it));
    }
  }
  return order;
}

// The first exception stops the chain and propagates.
template <typename Fn>
Fn composeStopping(std::vector<Fn> hooks) {
  return [order = runOrder(std::move(hooks))](const State& state) {
    for (const auto& hook : order) {
      hook(state);
    }
  };
}

}  // namespace

InitializeFn composeInitialize(std::vector<InitializeFn> hooks) {
  return composeStopping(std::move(hooks));
}

FinalizeFn composeFinalize(std::vector<FinalizeFn> hooks) {
  return composeStopping(std::move(hooks));
}

HealthCheckFn composeHealthChecks(std::vector<HealthCheckFn> hooks) {
  return composeStopping(std::move(hooks));
}

CompletionFn composeCompletion(std::vector<CompletionFn> hooks) {
  return composeStopping(std::move(hooks));
}

TerminateFn composeTerminate(std::vector<TerminateFn> hooks) {
  return composeStopping(std::move(hooks));
}

AbortFn composeAbort(std::vector<AbortFn> hooks) {
  return [order = runOrder(std::move(hooks))](const State& state) {
    std::exception_ptr first;
    for (const auto& hook : order) {
      try {
        hook(state);
      } catch (...) {
        if (!first) {
          first = std::current_exception();
        }
      }
    }
    if (first) {
      std::rethrow_exception(first);
    }
  };
}

}  // namespace resilient::restart
