#include <cerrno>
#include <string>

#include <catch2/catch.hpp>

#include "common/status.h"

using namespace resilient;

TEST_CASE("an ok Status holds nothing and translates to ncclSuccess", "[common][status]") {
  Status s;
  CHECK(s.ok());
  CHECK(s.toString() == "ok");
  CHECK(s.message().empty());
  CHECK(s.peer().empty());
  CHECK(toNcclResult(s) == ncclSuccess);
}

TEST_CASE("error kinds translate to NCCL codes through one table", "[common][status]") {
  auto [kind, expected] = GENERATE(table<ErrorKind, ncclResult_t>({
      {ErrorKind::kRemote, ncclRemoteError},
      {ErrorKind::kTimeout, ncclRemoteError},
      {ErrorKind::kSystem, ncclSystemError},
      {ErrorKind::kInvalidUsage, ncclInvalidUsage},
      {ErrorKind::kInternal, ncclInternalError},
  }));
  CAPTURE(errorKindName(kind));
  const Status s = Status::error(kind, "boom");
  CHECK_FALSE(s.ok());
  CHECK(s.kind() == kind);
  CHECK(toNcclResult(s) == expected);
  CHECK(toNcclResult(s) != ncclInProgress);
}

TEST_CASE("an error's text names its kind, peer, message and errno", "[common][status]") {
  const Status s = remoteError("connection reset while receiving", "10.0.0.2:40000", ECONNRESET);
  CHECK(s.peer() == "10.0.0.2:40000");
  CHECK(s.sysErrno() == ECONNRESET);
  const std::string text = s.toString();
  CHECK(text.find("remote error") == 0);
  CHECK(text.find("peer 10.0.0.2:40000") != std::string::npos);
  CHECK(text.find("connection reset while receiving") != std::string::npos);
  CHECK(text.find("ECONNRESET") != std::string::npos);
  CHECK(text.find("errno 104") != std::string::npos);
}

TEST_CASE("systemError reads errno by default", "[common][status]") {
  errno = EADDRINUSE;
  const Status s = systemError("bind");
  CHECK(s.kind() == ErrorKind::kSystem);
  CHECK(s.sysErrno() == EADDRINUSE);
}

TEST_CASE("copies of an error share it and stay equal", "[common][status]") {
  const Status a = timeoutError("no heartbeat for 2000 ms", "host-b:1234");
  const Status b = a;  // NOLINT(performance-unnecessary-copy-initialization)
  CHECK(b.kind() == ErrorKind::kTimeout);
  CHECK(b.toString() == a.toString());
}

namespace {

Result<int> parsePositive(int v) {
  if (v <= 0) {
    return invalidUsage("not positive: " + std::to_string(v));
  }
  return v;
}

Status chain(int v, int* out) {
  auto r = parsePositive(v);
  RESILIENT_TRY(r.status());
  *out = *r;
  return {};
}

}  // namespace

TEST_CASE("Result holds a value or an error", "[common][status]") {
  auto good = parsePositive(3);
  REQUIRE(good.ok());
  CHECK(*good == 3);
  CHECK(good.status().ok());

  auto bad = parsePositive(-1);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().kind() == ErrorKind::kInvalidUsage);
  CHECK(bad.status().message() == "not positive: -1");
}

TEST_CASE("a Result built from an ok Status becomes an internal error", "[common][status]") {
  Result<int> r{Status()};
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().kind() == ErrorKind::kInternal);
}

TEST_CASE("RESILIENT_TRY returns the first error", "[common][status]") {
  int out = 0;
  CHECK(chain(5, &out).ok());
  CHECK(out == 5);
  const Status s = chain(0, &out);
  CHECK(s.kind() == ErrorKind::kInvalidUsage);
  CHECK(out == 5);
}
