// MemoryStore: the store inside one process. Threads (ranks of a test, the
// restart loop and its monitor thread) share one instance; the semantics are
// the TCP store's, because both run the same StoreEngine.
#pragma once

#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "store/engine.h"
#include "store/store.h"

namespace resilient::store {

class MemoryStore final : public Store {
 public:
  explicit MemoryStore(Millis defaultTimeout = Millis(300000));
  ~MemoryStore() override;

  void set(std::string_view key, std::string_view value, Timeout timeout = {}) override;
  void setExpiring(std::string_view key, std::string_view value, Millis ttl,
                   Timeout timeout = {}) override;
  void setExpiringMany(const std::vector<KeyValue>& pairs, Millis ttl,
                       Timeout timeout = {}) override;
  std::optional<std::string> get(std::string_view key, Timeout timeout = {}) override;
  int64_t add(std::string_view key, int64_t delta, Timeout timeout = {}) override;
  CasResult compareSet(std::string_view key, std::optional<std::string_view> expected,
                       std::string_view desired, Timeout timeout = {}) override;
  std::vector<std::optional<std::string>> multiGet(const std::vector<std::string>& keys,
                                                   Timeout timeout = {}) override;
  void multiSet(const std::vector<KeyValue>& pairs, Timeout timeout = {}) override;
  bool remove(std::string_view key, Timeout timeout = {}) override;
  uint64_t removePrefix(std::string_view prefix, Timeout timeout = {}) override;
  bool check(const std::vector<std::string>& keys, Timeout timeout = {}) override;
  void wait(const std::vector<std::string>& keys, Timeout timeout = {}) override;
  BarrierResult barrier(const BarrierArrival& arrival, Timeout timeout = {}) override;
  std::string describe() const override { return "memory"; }

  // Answers every blocked call with StoreClosed; later calls throw it too.
  void close();

 private:
  struct Slot {
    std::condition_variable cv;
    std::optional<Completion> done;
  };
  // Blocks on a pending engine call until answered or `deadline`.
  Completion await(std::unique_lock<std::mutex>& lock, uint64_t pendingId, uint64_t tag, Slot& slot,
                   TimePoint deadline);
  void ensureOpen() const;

  const Millis defaultTimeout_;
  std::mutex mu_;
  bool closed_ = false;
  StoreEngine engine_;
  std::unordered_map<uint64_t, Slot*> slots_;
  uint64_t nextTag_ = 1;
};

}  // namespace resilient::store
