// RegionWatch, the polling consumer's view of a region: the faults after a
// number, read from their own slots (no whole snapshot), in order, across
// the ring's wrap-around.
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "blackbox/reader.h"
#include "blackbox/writer.h"
#include "tests/support/temp_dir.h"

using namespace resilient;

namespace {

resilient_blackbox_fault faultOfClass(uint32_t faultClass) {
  resilient_blackbox_fault f{};
  f.faultClass = faultClass;
  return f;
}

std::vector<uint64_t> numbers(const std::vector<resilient_blackbox_fault>& faults) {
  std::vector<uint64_t> out;
  for (const auto& f : faults) {
    out.push_back(f.number);
  }
  return out;
}

}  // namespace

TEST_CASE("the faults after a number, in order, the ring's last ones at most",
          "[blackbox][watch]") {
  test::TempDir dir;
  blackbox::Layout layout;
  layout.flightOps = 8;
  auto w = blackbox::Writer::create(dir.path().string(), "h", layout);
  REQUIRE(w.ok());
  auto watch = blackbox::RegionWatch::open(
      blackbox::regionPath(dir.path().string(), static_cast<uint32_t>(getpid())));
  REQUIRE(watch.ok());
  CHECK(watch->faultsAfter(0).empty());

  for (uint32_t i = 1; i <= 3; ++i) {
    w.value()->recordFault(faultOfClass(i));
  }
  CHECK(numbers(watch->faultsAfter(0)) == std::vector<uint64_t>{1, 2, 3});
  CHECK(numbers(watch->faultsAfter(2)) == std::vector<uint64_t>{3});
  CHECK(watch->faultsAfter(3).empty());
  CHECK(watch->faultsAfter(7).empty());  // a count from before a reset: nothing
  CHECK(watch->faultsAfter(1).front().faultClass == 2);

  // Past the ring: only the last RESILIENT_BLACKBOX_FAULTS remain, and they
  // are the ones a whole snapshot holds.
  const uint64_t total = RESILIENT_BLACKBOX_FAULTS + 5;
  for (uint64_t n = 4; n <= total; ++n) {
    w.value()->recordFault(faultOfClass(static_cast<uint32_t>(n)));
  }
  const auto after = watch->faultsAfter(0);
  REQUIRE(after.size() == RESILIENT_BLACKBOX_FAULTS);
  CHECK(after.front().number == total - RESILIENT_BLACKBOX_FAULTS + 1);
  CHECK(after.back().number == total);
  CHECK(numbers(after) == numbers(watch->read({.flight = false}).faults));
  CHECK(numbers(watch->faultsAfter(total - 2)) == std::vector<uint64_t>{total - 1, total});
}

TEST_CASE("a snapshot reads only the tables asked for", "[blackbox][watch]") {
  test::TempDir dir;
  blackbox::Layout layout;
  layout.flightOps = 8;
  auto w = blackbox::Writer::create(dir.path().string(), "h", layout);
  REQUIRE(w.ok());
  w.value()->recordFault(faultOfClass(1));
  REQUIRE(w.value()->claimComm() >= 0);
  auto watch = blackbox::RegionWatch::open(
      blackbox::regionPath(dir.path().string(), static_cast<uint32_t>(getpid())));
  REQUIRE(watch.ok());
  const blackbox::Snapshot all = watch->read();
  CHECK(all.faults.size() == 1);
  CHECK(all.comms.size() == 1);
  const blackbox::Snapshot comms =
      watch->read({.flight = false, .connections = false, .faults = false});
  CHECK(comms.faults.empty());
  CHECK(comms.connections.empty());
  CHECK(comms.comms.size() == 1);
  CHECK(comms.header.faultCount == 1);
}
