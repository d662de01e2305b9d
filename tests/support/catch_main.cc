// The one main of every Catch2 test binary: checks the registered
// preconditions (support/skip.h) and exits 77 when one does not hold.
#define CATCH_CONFIG_RUNNER
#include <cstdio>

#include <catch2/catch.hpp>

#include "tests/support/skip.h"

namespace resilient::test {

std::vector<PreconditionCheck>& preconditions() {
  static std::vector<PreconditionCheck> checks;
  return checks;
}

}  // namespace resilient::test

int main(int argc, char* argv[]) {
  for (const auto& check : resilient::test::preconditions()) {
    if (const std::string reason = check(); !reason.empty()) {
      std::printf("SKIP: %s\n", reason.c_str());
      return resilient::test::kSkipExitCode;
    }
  }
  return Catch::Session().run(argc, argv);
}
