// The CUDA health check where the machine may have no GPU (CI): it must end
// quickly, with a clear HealthCheckError when CUDA cannot be used, and pass
// when it can.
#include <chrono>
#include <string>

#include <catch2/catch.hpp>

#include "resilient/restart/errors.hpp"
#include "resilient/restart/health.hpp"

using namespace resilient::restart;
using namespace std::chrono_literals;

TEST_CASE("the CUDA check passes with a device and says why without one", "[health][cuda]") {
  auto check = cudaHealthCheck(60s);  // a first context creation may take seconds
  if (cudaAvailable()) {
    CHECK_NOTHROW(check(State{}));
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  try {
    check(State{});
    FAIL("the CUDA check passed without a usable CUDA device");
  } catch (const HealthCheckError& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.rfind("CUDA health check: ", 0) == 0);
    CHECK((what.find("device") != std::string::npos || what.find("runtime") != std::string::npos));
  }
  CHECK(std::chrono::steady_clock::now() - start < 5s);  // no hang without a GPU
}

TEST_CASE("cudaAvailable and cudaDevicePciBusId agree", "[health][cuda]") {
  const std::string busId = cudaDevicePciBusId();
  if (cudaAvailable()) {
    CHECK(busId.size() >= 12);  // "0000:17:00.0"
  } else {
    CHECK(busId.empty());
  }
}

TEST_CASE("an explicit device that does not exist fails the check", "[health][cuda]") {
  auto check = cudaHealthCheck(5s, 4096);
  CHECK_THROWS_AS(check(State{}), HealthCheckError);
}

TEST_CASE("the CUDA check's arguments are validated", "[health][cuda]") {
  CHECK_THROWS_AS(cudaHealthCheck(0ms), ConfigError);
  CHECK_THROWS_AS(cudaHealthCheck(1s, -2), ConfigError);
  CHECK_NOTHROW(cudaHealthCheck(std::nullopt));  // the knob's default, 30 s
}
