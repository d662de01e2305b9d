// The profiler's building blocks: handle encoding, the lock-free slot pool
// (also under contention), names and sizes from NCCL's descriptors.
#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "abi_driver.h"
#include "plugin/profiler/handle.h"
#include "plugin/profiler/index_pool.h"
#include "plugin/profiler/names.h"

namespace resilient::test {

using namespace resilient::profiler;

TEST_CASE("handles encode kind, context, slot, generation and channel; junk decodes to none",
          "[profiler][handle]") {
  void* h = encodeHandle({.kind = HandleKind::kKernelCh,
                          .channel = 63,
                          .context = 1023,
                          .slot = 16383,
                          .generation = kGenerationMask});
  CHECK(h != nullptr);
  const Handle d = decodeHandle(h);
  CHECK(d.kind == HandleKind::kKernelCh);
  CHECK(d.context == 1023);
  CHECK(d.slot == 16383);
  CHECK(d.generation == kGenerationMask);
  CHECK(d.channel == 63);
  CHECK(decodeHandle(nullptr).kind == HandleKind::kNone);
  // Kind bits 0 or above kKernelPhase: not ours.
  CHECK(decodeHandle(opaque(0x3f)).kind == HandleKind::kNone);
  CHECK(decodeHandle(opaque(uintptr_t{8} << 6)).kind == HandleKind::kNone);
  CHECK(decodeHandle(opaque(uintptr_t{15} << 6)).kind == HandleKind::kNone);
  CHECK(decodeHandle(encodeHandle({.kind = HandleKind::kKernelPhase, .channel = 63})).kind ==
        HandleKind::kKernelPhase);
  CHECK(encodeHandle({.kind = HandleKind::kPassive}) != nullptr);
}

TEST_CASE("the index pool hands out each index once and takes them back", "[profiler][pool]") {
  IndexPool pool(8);
  CHECK(pool.countFree() == 8);
  std::set<uint32_t> taken;
  uint32_t i = 0;
  while (pool.pop(&i)) {
    CHECK(i < 8);
    CHECK(taken.insert(i).second);
  }
  CHECK(taken.size() == 8);
  CHECK(pool.countFree() == 0);
  for (uint32_t t : taken) {
    pool.push(t);
  }
  CHECK(pool.countFree() == 8);
  IndexPool empty(0);
  CHECK(!empty.pop(&i));
}

TEST_CASE("the index pool under contention never hands out an index twice",
          "[profiler][pool][threads]") {
  constexpr uint32_t kSlots = 64;
  IndexPool pool(kSlots);
  std::vector<std::atomic<int>> owners(kSlots);
  std::atomic<bool> duplicate{false};
  std::vector<std::thread> threads;
  threads.reserve(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int n = 0; n < 20000; ++n) {
        uint32_t i = 0;
        if (!pool.pop(&i)) {
          continue;
        }
        if (owners[i].fetch_add(1) != 0) {
          duplicate = true;
        }
        owners[i].fetch_sub(1);
        pool.push(i);
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  CHECK(!duplicate.load());
  CHECK(pool.countFree() == kSlots);
}

TEST_CASE("names: functions, datatypes, algorithms, protocols, step states", "[profiler][names]") {
  CHECK(funcIndexOf("AllReduce") == 4);
  CHECK(funcIndexOf("Gather") == 10);
  CHECK(funcIndexOf("Bogus") == kFuncOther);
  CHECK(funcIndexOf(nullptr) == kFuncOther);
  CHECK(std::string(funcName(6)) == "Send");
  CHECK(std::string(funcName(99)) == "Unknown");
  CHECK(datatypeSize("ncclFloat32") == 4);
  CHECK(datatypeSize("ncclBfloat16") == 2);
  CHECK(datatypeSize("ncclUint64") == 8);
  CHECK(datatypeSize("nope") == 0);
  CHECK(datatypeSize(static_cast<const char*>(nullptr)) == 0);
  CHECK(std::string(datatypeName(7u)) == "ncclFloat32");
  CHECK(datatypeSize(11u) == 1);
  CHECK(std::string(algoName(6)) == "PAT");
  CHECK(std::string(protoName(1)) == "LL128");
  CHECK(std::string(stepStateName(10)) == "RecvWait");
  CHECK(std::string(stepStateMeaning(9)).find("network") != std::string::npos);
}

}  // namespace resilient::test
