// The C++ API through libresilient-restart.so only (no static library of the
// project linked in): its exceptions can be caught by their base class and
// its communicators dynamic_cast, which needs the library to export their
// type information. Exit status 0 when every check holds.
#include <cstdio>
#include <memory>

#include "resilient/restart.hpp"

namespace rr = resilient::restart;

namespace {

int failures = 0;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "check failed: %s\n", what);
    ++failures;
  }
}

}  // namespace

int main() {
  rr::Options options;
  options.softTimeout = std::chrono::milliseconds(100000);  // >= hardTimeout: refused
  try {
    rr::Wrapper wrapper(options);
    check(false, "invalid options accepted");
  } catch (const rr::RestartError& e) {  // a ConfigError, caught by its base
    check(dynamic_cast<const rr::ConfigError*>(&e) != nullptr, "ConfigError's type");
  } catch (...) {
    check(false, "ConfigError not caught as RestartError");
  }
  try {
    (void)rr::maxActiveWorldSize(-1);
    check(false, "a negative active world size accepted");
  } catch (const std::invalid_argument&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "unexpected exception type: %s\n", e.what());
    check(false, "a bad policy argument not reported as invalid_argument");
  }
  const std::shared_ptr<rr::Communicator> none;
  check(std::dynamic_pointer_cast<rr::HostCommunicator>(none) == nullptr, "dynamic_pointer_cast");
  if (failures == 0) {
    std::printf("public C++ API checks passed\n");
  }
  return failures == 0 ? 0 : 1;
}
