// Replays events through the exported ncclProfiler_vN structs, as NCCL would
// call them: versioned descriptors built from the version-neutral Event.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "event_stream.h"
#include "nccl/result.h"

namespace resilient::test {

struct CommSpec {
  uint64_t commHash = 0x1234abcd5678ef00ull;
  std::string name = "test-comm";
  int nNodes = 2;
  int nranks = 4;
  int rank = 0;
  int maskBefore = 0;  // NCCL's event mask before this init (set by another communicator)
};

class AbiDriver {
 public:
  virtual ~AbiDriver() = default;
  virtual int version() const = 0;
  virtual ncclResult_t init(void** context, int* mask, const CommSpec& comm) = 0;
  // `parent` is what the replay passes as parentObj.
  virtual ncclResult_t start(void* context, void** handle, const Event& e, void* parent) = 0;
  virtual ncclResult_t stop(void* handle) = 0;
  // nullArgs: pass NULL state args.
  virtual ncclResult_t record(void* handle, int state, uint64_t timer, bool nullArgs) = 0;
  virtual ncclResult_t finalize(void* context) = 0;
};

std::unique_ptr<AbiDriver> makeDriver(int version);

// A handle value that is not ours (what a buggy or foreign caller may pass).
inline void* opaque(uintptr_t value) {
  return reinterpret_cast<void*>(value);  // NOLINT(performance-no-int-to-ptr)
}

// Replays a stream on one communicator, on one thread or split over a
// "user" and a "progress" thread the way NCCL splits them. A child waits
// (spinning on an atomic: synchronisation, not timing) until the event whose
// handle it needs was started, as NCCL's proxy queue orders them.
class Replay {
 public:
  Replay(AbiDriver& driver, const CommSpec& comm);
  ~Replay();  // finalizes if still open
  Replay(const Replay&) = delete;
  Replay& operator=(const Replay&) = delete;

  ncclResult_t initResult() const { return initResult_; }
  void* context() const { return context_; }
  int mask() const { return mask_; }

  // Replays events [from, to) of `events` (ids < maxIds).
  void run(const std::vector<Event>& events, size_t from, size_t to, bool threaded);
  void run(const std::vector<Event>& events, bool threaded) {
    run(events, 0, events.size(), threaded);
  }
  void finalize();

  void* handle(int id) const;
  size_t nullHandles() const { return nullHandles_.load(); }
  bool allCallsSucceeded() const { return failures_.load() == 0; }

 private:
  void apply(const Event& e);
  void ensure(size_t ids);

  AbiDriver& driver_;
  void* context_ = nullptr;
  int mask_ = 0;
  ncclResult_t initResult_ = ncclSuccess;
  bool finalized_ = false;
  size_t capacity_ = 0;
  std::unique_ptr<std::atomic<void*>[]> handles_;
  std::unique_ptr<std::atomic<bool>[]> started_;
  std::atomic<size_t> nullHandles_{0};
  std::atomic<size_t> failures_{0};
};

}  // namespace resilient::test
