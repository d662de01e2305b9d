// The coordination store: the key/value service every rank of a job shares
// (fault records, heartbeats, rank registry, communicator ids, barriers).
//
// One interface, three backends: MemoryStore (in-process, tests and single
// process jobs), TcpStoreClient (the embedded TCP store, server in
// tcp/server.h or the `resilient-store` binary) and EtcdStore (a replicated
// etcd v3 cluster: no single point of failure). PrefixView narrows any of
// them to a key prefix. docs/store.md describes the semantics in full.
//
// Every call has a timeout (Timeout{}: the store's default) and either returns
// its result or throws a StoreError subclass (errors.h). Keys are at most
// kMaxKeyBytes, values at most kMaxValueBytes; larger ones are refused with
// InvalidArgument before anything is sent. Every implementation is
// thread-safe: a thread blocked in wait() or barrier() does not hold up
// other threads' calls.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace resilient::store {

inline constexpr size_t kMaxKeyBytes = 4096;
inline constexpr size_t kMaxValueBytes = 1u << 20;
// multiSet is all-or-nothing up to this many keys on every backend (etcd's
// default --max-txn-ops); larger batches are applied in order, in chunks.
inline constexpr size_t kMaxAtomicKeys = 128;
// A barrier's world size is at most this.
inline constexpr int kMaxBarrierWorld = 1 << 20;

using Millis = std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;
using TimePoint = SteadyClock::time_point;

// The deadline of the operation a thread's store calls are made for (a
// barrier, a rendezvous, one slice of either): while a DeadlineScope lives,
// every store call of that thread ends by its deadline, whatever timeout it
// names itself (its own or the store's default), with at least 1 ms to try.
// Scopes nest; the earliest deadline wins.
class DeadlineScope {
 public:
  explicit DeadlineScope(TimePoint deadline);
  ~DeadlineScope();
  DeadlineScope(const DeadlineScope&) = delete;
  DeadlineScope& operator=(const DeadlineScope&) = delete;
  // This thread's deadline, if a scope is open.
  static std::optional<TimePoint> current() noexcept;

 private:
  std::optional<TimePoint> previous_;
};

// How long one call may take. A default-constructed Timeout means "the
// store's default" (NCCL_RESILIENT_STORE_TIMEOUT_MS unless the store was
// built with another). Either is cut to the thread's DeadlineScope.
class Timeout {
 public:
  constexpr Timeout() = default;
  constexpr Timeout(Millis ms) : ms_(ms < Millis(0) ? Millis(0) : ms) {}  // NOLINT: implicit
  constexpr bool isDefault() const { return ms_ < Millis(0); }
  // What the call may take: this timeout, or `fallback` (the store's
  // default), at most until the DeadlineScope's deadline.
  Millis orDefault(Millis fallback) const;

 private:
  Millis ms_{-1};
};

using KeyValue = std::pair<std::string, std::string>;

struct CasResult {
  bool swapped = false;
  // The value now stored under the key (the desired one after a swap,
  // otherwise what prevented it; nullopt when the key is absent).
  std::optional<std::string> current;
};

// One arrival at a barrier. A barrier is named, numbered by generation and
// counts ranks 0 .. worldSize-1; each rank is counted once however often it
// (or a third party on its behalf) arrives, so arrival is idempotent and
// re-entrant. When the last rank is counted the store releases every waiter
// at once.
struct BarrierArrival {
  std::string name;
  uint64_t generation = 0;
  int rank = 0;
  int worldSize = 0;
  // true: block until the barrier completes. false: count `rank` and return
  // (a monitor marking a dead rank, or a rank that must not wait).
  bool waitForRelease = true;
  // Several ranks counted by one arrival (a node's agent for its ranks,
  // store/proxy/node_proxy.h); when not empty it is used instead of `rank`.
  // The in-range ones are counted, each once (named twice or counted before:
  // not again); out-of-range ones are surplus, recorded, and the call then
  // fails with BarrierOverflow. One wait for all of them.
  std::vector<int> ranks{};
};

// The ranks an arrival counts: `ranks`, or `rank` alone.
std::vector<int> arrivalRanks(const BarrierArrival& arrival);
// Who arrives, for error messages: "rank 3", or "ranks 0-3, 7" for several.
std::string arrivalRanksText(const BarrierArrival& arrival);

struct BarrierResult {
  bool completed = false;     // the barrier is complete (always true after a wait)
  // 1-based order of this rank's count (several ranks: of the first one this
  // call counted); 0 if it was already counted.
  uint32_t arrivalIndex = 0;
  uint32_t arrived = 0;       // ranks counted when this call returned (worldSize once complete)
};

class Store {
 public:
  Store() = default;
  virtual ~Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Stores `value` under `key`, replacing any previous value.
  virtual void set(std::string_view key, std::string_view value, Timeout timeout = {}) = 0;
  // As set(), and the key disappears `ttl` after this call unless set again
  // (heartbeats). A plain set() of the key removes the expiry.
  virtual void setExpiring(std::string_view key, std::string_view value, Millis ttl,
                           Timeout timeout = {}) = 0;
  // setExpiring of every pair with one expiry (a node's heartbeats at once):
  // one request where the backend can (TCP: one frame; etcd: one lease and a
  // transaction per kMaxAtomicKeys keys), else one call per pair. A key named
  // twice keeps its last value; an empty batch does nothing; every key and
  // value is checked (InvalidArgument) before anything is written.
  virtual void setExpiringMany(const std::vector<KeyValue>& pairs, Millis ttl,
                               Timeout timeout = {});
  // The value, or nullopt when the key is absent. Does not wait.
  virtual std::optional<std::string> get(std::string_view key, Timeout timeout = {}) = 0;
  // Atomically adds `delta` to the decimal integer stored under `key` (absent
  // counts as 0) and returns the new value. InvalidArgument when the stored
  // value is not a decimal int64 or the sum overflows.
  virtual int64_t add(std::string_view key, int64_t delta, Timeout timeout = {}) = 0;
  // Atomically: if the key's value equals `expected` (nullopt: the key is
  // absent), store `desired`. Reports what happened and the value now stored.
  virtual CasResult compareSet(std::string_view key, std::optional<std::string_view> expected,
                               std::string_view desired, Timeout timeout = {}) = 0;
  // Values of `keys` in order (nullopt where absent), read at one instant.
  virtual std::vector<std::optional<std::string>> multiGet(const std::vector<std::string>& keys,
                                                           Timeout timeout = {}) = 0;
  // Stores every pair; see kMaxAtomicKeys.
  virtual void multiSet(const std::vector<KeyValue>& pairs, Timeout timeout = {}) = 0;
  // Removes the key; true when it existed.
  virtual bool remove(std::string_view key, Timeout timeout = {}) = 0;
  // Removes every key starting with `prefix`, and the barriers whose names
  // start with it; returns the number of keys removed.
  virtual uint64_t removePrefix(std::string_view prefix, Timeout timeout = {}) = 0;
  // True when every key exists. Does not wait.
  virtual bool check(const std::vector<std::string>& keys, Timeout timeout = {}) = 0;
  // Blocks until every key exists; the store wakes the caller (no polling).
  // TimeoutError (missingKeys() names the absent keys) at the deadline.
  virtual void wait(const std::vector<std::string>& keys, Timeout timeout = {}) = 0;
  // Counts `arrival.rank` at the barrier and, if asked, waits for its release.
  // BarrierTimeout names the missing ranks, BarrierOverflow the surplus ones
  // (rank outside [0, worldSize)); a worldSize that differs from the first
  // arrival's is InvalidArgument.
  virtual BarrierResult barrier(const BarrierArrival& arrival, Timeout timeout = {}) = 0;
  // "tcp://10.0.0.1:29500", "etcd://a:2379,b:2379", "memory" (for log lines).
  virtual std::string describe() const = 0;

  bool exists(std::string_view key, Timeout timeout = {});
  // wait({key}) then get(key): the value as soon as someone sets it.
  std::string waitGet(std::string_view key, Timeout timeout = {});
};

// Throws InvalidArgument for an empty or oversized key, or an oversized value.
void checkKey(std::string_view key);
void checkValue(std::string_view value);
void checkBarrier(const BarrierArrival& arrival);
// Parses a counter value as add() does; nullopt when it is not a decimal int64.
std::optional<int64_t> parseCounter(std::string_view text);

}  // namespace resilient::store
