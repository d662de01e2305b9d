// Skipping a whole test binary (Catch2 2.13 has no SKIP()): a test file
// registers a precondition; the shared main checks them all before running
// and exits with 77, Meson's "skipped", printing the reason, when one fails.
//
//   static const resilient::test::Precondition kNeedsRoot{
//       [] { return geteuid() == 0 ? std::string() : "needs root"; }};
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace resilient::test {

inline constexpr int kSkipExitCode = 77;

// Returns an empty string when the precondition holds, else the skip reason.
using PreconditionCheck = std::function<std::string()>;

std::vector<PreconditionCheck>& preconditions();

struct Precondition {
  explicit Precondition(PreconditionCheck check) { preconditions().push_back(std::move(check)); }
};

}  // namespace resilient::test
