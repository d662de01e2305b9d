// StoreEngine: the state behind a store — keys and their expiry, pending
// waits, barriers — and the rules that change it. Single-threaded by design:
// MemoryStore drives it under its mutex, the TCP server from its event-loop
// thread. Deferred answers (a wait that becomes ready, a barrier released)
// are delivered through the Notify callback given at construction, always
// from inside the engine call that caused them. A barrier release can go to
// a ReleaseSink instead, as one array of waiters: the TCP server answers a
// 16k-rank release from several threads, and the engine's own bookkeeping
// for those waiters is deferred until reap() so it does not delay the
// answers.
//
// The engine keeps no clocks for waiters: the owner of a pending call decides
// when it has waited long enough and calls expire(id), which answers it with
// what is still missing.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "store/barrier_state.h"
#include "store/store.h"

namespace resilient::store {

// The answer to a call that did not complete immediately.
struct Completion {
  enum class Kind {
    kWaitReady,        // every awaited key exists
    kWaitTimeout,      // expire(): missingKeys lists the absent ones
    kBarrierReleased,  // the barrier completed; `result` as for the arriving call
    kBarrierTimeout,   // expire(): `report` names the missing ranks
    kDropped,          // its barrier was removed (removePrefix) before completing
  };
  uint64_t owner = 0;  // as passed by the caller (connection id, ...)
  uint64_t tag = 0;    // as passed by the caller (request id, ...)
  Kind kind = Kind::kWaitReady;
  std::vector<std::string> missingKeys;
  BarrierResult result;
  BarrierReport report;
};

// What an add() or barrier() call did right away.
struct AddOutcome {
  bool ok = false;  // false: the stored value is not a counter, or overflow
  int64_t value = 0;
};

struct BarrierOutcome {
  enum class Kind {
    kDone,      // counted; `result` says whether the barrier is complete
    kPending,   // counted, waiting: a Completion with `pendingId` follows
    kOverflow,  // rank outside [0, worldSize): `report` names the surplus
    kMismatch,  // worldSize differs from the barrier's: `message`
    kStale,     // generation complete and forgotten
  };
  Kind kind = Kind::kDone;
  BarrierResult result;
  uint64_t pendingId = 0;
  BarrierReport report;
  std::string message;
};

class StoreEngine {
 public:
  // Called for every deferred answer, from inside the engine call that
  // produced it; it must not call back into the engine.
  using Notify = std::function<void(const Completion&)>;
  // Called with every waiter of a barrier that completed (in arrival order)
  // and the number of ranks counted; must not call back into the engine.
  using ReleaseSink =
      std::function<void(const std::vector<BarrierWaiter>& waiters, uint32_t arrived)>;

  // Without a sink, released waiters are answered through `notify` one by one.
  explicit StoreEngine(Notify notify, ReleaseSink release = nullptr);
  StoreEngine(const StoreEngine&) = delete;
  StoreEngine& operator=(const StoreEngine&) = delete;

  // Keys. `expiry`: the instant the key disappears (nullopt: never).
  void set(std::string_view key, std::string_view value,
           std::optional<TimePoint> expiry = std::nullopt);
  const std::string* find(std::string_view key) const;
  AddOutcome add(std::string_view key, int64_t delta);
  CasResult compareSet(std::string_view key, std::optional<std::string_view> expected,
                       std::string_view desired);
  bool remove(std::string_view key);
  uint64_t removePrefix(std::string_view prefix);
  size_t size() const noexcept { return keys_.size(); }

  // Registers a wait for `keys` unless they all exist. Returns 0 when they
  // do (nothing pending), else the pending id; its Completion follows.
  uint64_t wait(const std::vector<std::string>& keys, uint64_t owner, uint64_t tag);

  BarrierOutcome barrier(const BarrierArrival& arrival, uint64_t owner, uint64_t tag);

  // Answers pending call `id` with a timeout (no-op if already answered).
  void expire(uint64_t id);
  // Forgets every pending call of `owner` without answering (disconnect).
  void dropOwner(uint64_t owner);
  bool pending(uint64_t id) {
    reap();
    return pending_.count(id) != 0;
  }
  size_t pendingCount() {
    reap();
    return pending_.size();
  }
  // Forgets the pending entries of waiters handed to the ReleaseSink. Runs by
  // itself before any call that looks them up; the TCP server also calls it
  // a second after a release, once the replies are long on their way.
  void reap();

  // Removes keys whose expiry is <= now.
  void expireKeys(TimePoint now);
  std::optional<TimePoint> nextKeyExpiry() const;

 private:
  struct TransparentHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const noexcept {
      return std::hash<std::string_view>{}(s);
    }
  };
  using KeySet = std::unordered_set<std::string, TransparentHash, std::equal_to<>>;
  struct Entry {
    std::string value;
    uint64_t expiryStamp = 0;  // 0: no expiry; else matches an entry of expiries_
  };
  struct BarrierKey {
    std::string name;
    uint64_t generation = 0;
    bool operator<(const BarrierKey& o) const {
      return name != o.name ? name < o.name : generation < o.generation;
    }
  };
  using BarrierMap = std::map<BarrierKey, BarrierState>;
  struct Pending {
    uint64_t owner = 0;
    uint64_t tag = 0;
    bool isBarrier = false;
    std::vector<std::string> keys;  // wait: keys still absent (deduplicated)
    BarrierMap::iterator barrier;   // barrier: which one (stable while it has waiters)
    uint32_t arrivalIndex = 0;      // barrier: this arrival's index
  };
  struct Series {                 // every generation of one barrier name
    uint64_t forgottenBelow = 0;  // generations below this were collected
  };

  void storeValue(std::string_view key, std::string value, std::optional<TimePoint> expiry);
  void keyAppeared(const std::string& key);
  void complete(uint64_t id, Completion& c);
  void removePending(uint64_t id);
  void addToOwner(uint64_t owner, uint64_t id);
  void releaseBarrier(BarrierState& state);
  void collectBarriers(const std::string& name, uint64_t completedGeneration);

  Notify notify_;
  std::unordered_map<std::string, Entry, TransparentHash, std::equal_to<>> keys_;
  // expiry instant -> (stamp, key); stale rows (stamp mismatch) are skipped.
  std::multimap<TimePoint, std::pair<uint64_t, std::string>> expiries_;
  uint64_t nextStamp_ = 1;

  uint64_t nextPendingId_ = 1;
  std::unordered_map<uint64_t, Pending> pending_;
  std::unordered_map<std::string, std::unordered_set<uint64_t>, TransparentHash, std::equal_to<>>
      keyWaiters_;
  // Pending ids per owner, for dropOwner. Answered ids are not removed one
  // by one (a barrier release answers thousands at once); registration
  // compacts a list once it grows.
  std::unordered_map<uint64_t, std::vector<uint64_t>> byOwner_;

  ReleaseSink release_;
  // Waiters given to release_ whose pending entries reap() still has to erase.
  std::vector<std::vector<BarrierWaiter>> released_;

  BarrierMap barriers_;
  std::map<std::string, Series, std::less<>> series_;
};

}  // namespace resilient::store
