#include <new>
#include <stdexcept>

#include <catch2/catch.hpp>

#include "common/boundary.h"
#include "tests/support/mock_logger.h"

using namespace resilient;
using resilient::test::CapturingLogger;

TEST_CASE("the boundary passes results and translates Status", "[common][boundary]") {
  CapturingLogger logger;
  CHECK(boundary::call("ok", [] { return ncclSuccess; }) == ncclSuccess);
  CHECK(boundary::call("status", [] { return Status(); }) == ncclSuccess);
  CHECK(boundary::call("remote", [] { return remoteError("peer gone", "h:1"); }) ==
        ncclRemoteError);
  CHECK(boundary::call("code", [] { return ncclSystemError; }) == ncclSystemError);
  CHECK(logger.count(NCCL_LOG_WARN) == 0);
}

TEST_CASE("the boundary turns each exception into a code and one WARN", "[common][boundary]") {
  CapturingLogger logger;
  SECTION("std::exception -> ncclInternalError") {
    auto r = boundary::call("isend",
                            []() -> ncclResult_t { throw std::runtime_error("broken invariant"); });
    CHECK(r == ncclInternalError);
    CHECK(logger.count(NCCL_LOG_WARN, "isend: unexpected exception: broken invariant") == 1);
  }
  SECTION("std::bad_alloc -> ncclSystemError") {
    auto r = boundary::call("regMr", []() -> Status { throw std::bad_alloc(); });
    CHECK(r == ncclSystemError);
    CHECK(logger.count(NCCL_LOG_WARN, "regMr: unexpected exception: out of memory") == 1);
  }
  SECTION("anything else -> ncclInternalError") {
    auto r = boundary::call("test", []() -> ncclResult_t { throw 42; });
    CHECK(r == ncclInternalError);
    CHECK(logger.count(NCCL_LOG_WARN, "test: unexpected exception: unknown exception") == 1);
  }
  CHECK(logger.messages().size() == 1);
}

TEST_CASE("the boundary never lets ncclInProgress through", "[common][boundary]") {
  CapturingLogger logger;
  CHECK(boundary::call("connect", [] { return ncclInProgress; }) == ncclInternalError);
  CHECK(logger.count(NCCL_LOG_WARN, "connect: internal bug") == 1);
}

TEST_CASE("the boundary itself is noexcept", "[common][boundary]") {
  STATIC_REQUIRE(noexcept(boundary::call("x", [] { return ncclSuccess; })));
}
