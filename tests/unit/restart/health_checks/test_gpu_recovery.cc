// The GPU recovery check's decisions over a fake NVML, and the real check
// where NVML may be missing.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "resilient/restart/errors.hpp"
#include "resilient/restart/health.hpp"
#include "restart/health_checks/gpu_recovery.h"
#include "restart/health_checks/nvml.h"
#include "tests/support/mock_logger.h"

using namespace resilient::restart;
using namespace resilient::restart::detail;

namespace {

// What the fake NVML answers.
struct FakeGpu {
  NvmlReturn fieldCall = kNvmlSuccess;
  NvmlReturn fieldResult = kNvmlSuccess;
  unsigned action = 0;
  std::vector<int> links;  // state per link; links past the end are absent
  NvmlReturn linkError = kNvmlSuccess;
};
FakeGpu gFake;

const char* fakeErrorString(NvmlReturn r) {
  return r == kNvmlErrorNotSupported ? "Not Supported" : "Unknown Error";
}

NvmlReturn fakeFieldValues(NvmlDevice, int count, NvmlFieldValue* values) {
  REQUIRE(count == 1);
  REQUIRE(values[0].fieldId == kNvmlFieldGpuRecoveryAction);
  values[0].nvmlReturn = gFake.fieldResult;
  values[0].valueType = static_cast<int>(NvmlValueType::kUnsignedInt);
  values[0].value.uiVal = gFake.action;
  return gFake.fieldCall;
}

NvmlReturn fakeNvLinkState(NvmlDevice, unsigned link, int* state) {
  if (gFake.linkError != kNvmlSuccess) {
    return gFake.linkError;
  }
  if (link >= gFake.links.size()) {
    return kNvmlErrorInvalidArgument;
  }
  *state = gFake.links[link];
  return kNvmlSuccess;
}

NvmlApi fakeNvml() {
  NvmlApi api;
  api.library = "fake";
  api.errorString = fakeErrorString;
  api.getFieldValues = fakeFieldValues;
  api.getNvLinkState = fakeNvLinkState;
  return api;
}

void check(bool failOnNvLinkDown = false) {
  checkGpuRecovery(fakeNvml(), nullptr, "GPU 0000:17:00.0", failOnNvLinkDown);
}

}  // namespace

TEST_CASE("recovery action NONE passes, every other action fails", "[health][gpu]") {
  gFake = FakeGpu{};
  gFake.links = {1, 1, 1, 1};
  CHECK_NOTHROW(check());
  for (const auto& [action, name] :
       std::vector<std::pair<unsigned, std::string>>{{1, "GPU_RESET"},
                                                     {2, "NODE_REBOOT"},
                                                     {3, "DRAIN_P2P"},
                                                     {4, "DRAIN_AND_RESET"},
                                                     {42, "action 42"}}) {
    gFake.action = action;
    CHECK_THROWS_WITH(check(), Catch::Contains("GPU 0000:17:00.0 needs recovery action " + name));
    CHECK_THROWS_AS(check(), HealthCheckError);
    // A reset needs the process off the GPU: only those leave for a new one.
    bool newProcess = false;
    try {
      check();
    } catch (const RankNeedsNewProcess&) {
      newProcess = true;
    } catch (const HealthCheckError&) {
    }
    CHECK(newProcess == (action == 1 || action == 4));
  }
}

TEST_CASE("a driver without the recovery field passes; a lost GPU fails", "[health][gpu]") {
  gFake = FakeGpu{};
  gFake.fieldResult = kNvmlErrorNotSupported;
  CHECK_NOTHROW(check());
  gFake.fieldResult = 15;  // NVML_ERROR_GPU_IS_LOST
  CHECK_THROWS_WITH(check(), Catch::Contains("cannot read the recovery action") &&
                                 Catch::Contains("NVML error 15"));
  gFake = FakeGpu{};
  gFake.fieldCall = 999;
  CHECK_THROWS_AS(check(), HealthCheckError);
}

TEST_CASE("NVLink links down are reported, and fail only when asked", "[health][gpu]") {
  gFake = FakeGpu{};
  gFake.links = {1, 0, 1, 0};
  {
    resilient::test::CapturingLogger logger;
    CHECK_NOTHROW(check(false));
    CHECK(logger.count(NCCL_LOG_WARN, "NVLink 1,3 not active") == 1);
  }
  CHECK_THROWS_WITH(check(true), Catch::Contains("NVLink 1,3 not active"));
  gFake.links = {};  // no NVLink at all
  CHECK_NOTHROW(check(true));
  gFake.linkError = 15;
  CHECK_THROWS_WITH(check(false), Catch::Contains("cannot read NVLink 0"));
}

TEST_CASE("field values of every type read as unsigned", "[health][gpu]") {
  NvmlFieldValue f{};
  f.valueType = static_cast<int>(NvmlValueType::kUnsignedLongLong);
  f.value.ullVal = 3;
  CHECK(fieldValueAsUnsigned(f) == 3);
  f.valueType = static_cast<int>(NvmlValueType::kSignedInt);
  f.value.siVal = -1;
  CHECK(fieldValueAsUnsigned(f) == 0);
  f.valueType = static_cast<int>(NvmlValueType::kUnsignedShort);
  f.value.usVal = 4;
  CHECK(fieldValueAsUnsigned(f) == 4);
}

TEST_CASE("the real GPU recovery check without NVML says why", "[health][gpu]") {
  auto realCheck = gpuRecoveryCheck();
  if (!nvmlAvailable()) {
    CHECK_THROWS_WITH(realCheck(State{}), Catch::StartsWith("GPU health check: ") &&
                                              Catch::Contains("libnvidia-ml.so.1"));
  } else if (cudaAvailable()) {
    CHECK_NOTHROW(realCheck(State{}));
  }
  CHECK_THROWS_AS(gpuRecoveryCheck({.device = -5}), ConfigError);
}
