#include "store/memory_store.h"

#include "store/errors.h"

namespace resilient::store {
namespace {
constexpr uint64_t kOwner = 1;  // every call of this store has the same owner
}

MemoryStore::MemoryStore(Millis defaultTimeout)
    : defaultTimeout_(defaultTimeout), engine_([this](const Completion& c) {
        auto it = slots_.find(c.tag);
        if (it != slots_.end()) {
          it->second->done = c;
          it->second->cv.notify_one();
        }
      }) {}

MemoryStore::~MemoryStore() {
  close();
}

void MemoryStore::close() {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
  for (auto& [tag, slot] : slots_) {
    slot->cv.notify_one();
  }
}

void MemoryStore::ensureOpen() const {
  if (closed_) {
    throw StoreClosed("memory store closed");
  }
}

void MemoryStore::set(std::string_view key, std::string_view value, Timeout /*timeout*/) {
  checkKey(key);
  checkValue(value);
  std::lock_guard<std::mutex> lock(mu_);
  ensureOpen();
  engine_.expireKeys(SteadyClock::now());
  engine_.set(key, value);
}

void MemoryStore::setExpiring(std::string_view key, std::string_view value, Millis ttl,
                              Timeout timeout) {
  setExpiringMany({{std::string(key), std::string(value)}}, ttl, timeout);
}

void MemoryStore::setExpiringMany(const std::vector<KeyValue>& pairs, Millis ttl,
                                  Timeout /*timeout*/) {
  for (const auto& [k, v] : pairs) {
    checkKey(k);
    checkValue(v);
  }
  std::lock_guard<std::mutex> lock(mu_);
  ensureOpen();
  const TimePoint now = SteadyClock::now();
  engine_.expireKeys(now);
  for (const auto& [k, v] : pairs) {
    engine_.set(k, v, now + std::max(ttl, Millis(0)));
  }
}

std::optional<std::string> MemoryStore::get(std::string_view key, Timeout /*timeout*/) {
  checkKey(key);
  std::lock_guard<std::mutex> lock(mu_);
  ensureOpen();
  engine_.expireKeys(SteadyClock::now());
  const std::string* v = engine_.find(key);
  return v ? std::optional<std::string>(*v) : std::nullopt;
}

int64_t MemoryStore::add(std::string_view key, int64_t delta, Timeout /*timeout*/) {
  checkKey(key);
  std::lock_guard<std::mutex> lock(mu_);
  ensureOpen();
  engine_.expireKeys(SteadyClock::now());
  AddOutcome r = engine_.add(key, delta);
  if (!r.ok) {
    throw InvalidArgument("add on key '" + std::string(key) +
                          "': the stored value is not a decimal int64, or the sum overflows");
  }
  return r.value;
}

CasResult MemoryStore::compareSet(std::string_view key, std::optional<std::string_view> expected,
                                  std::string_view desired, Timeout /*timeout*/) {
  checkKey(key);
  checkValue(desired);
  if (expected) {
    checkValue(*expected);
  }
  std::lock_guard<std::mutex> lock(mu_);
  ensureOpen();
  engine_.expireKeys(SteadyClock::now());
  return engine_.compareSet(key, expected, desired);
}

std::vector<std::optional<std::string>> MemoryStore::multiGet(const std::vector<std::string>& keys,
                                                              Timeout /*timeout*/) {
  for (const auto& k : keys) {
    checkKey(k);
  }
  std::lock_guard<std::mutex> lock(mu_);
  ensureOpen();
  engine_.expireKeys(SteadyClock::now());
  std::vector<std::optional<std::string>> out;
  out.reserve(keys.size());
  for (const auto& k : keys) {
    const std::string* v = engine_.find(k);
    out.push_back(v ? std::optional<std::string>(*v) : std::nullopt);
  }
  return out;
}

void MemoryStore::multiSet(const std::vector<KeyValue>& pairs, Timeout /*timeout*/) {
  for (const auto& [k, v] : pairs) {
    checkKey(k);
    checkValue(v);
  }
  std::lock_guard<std::mutex> lock(mu_);
  ensureOpen();
  engine_.expireKeys(SteadyClock::now());
  for (const auto& [k, v] : pairs) {
    engine_.set(k, v);
  }
}

bool MemoryStore::remove(std::string_view key, Timeout /*timeout*/) {
  checkKey(key);
  std::lock_guard<std::mutex> lock(mu_);
  ensureOpen();
  engine_.expireKeys(SteadyClock::now());
  return engine_.remove(key);
}

uint64_t MemoryStore::removePrefix(std::string_view prefix, Timeout /*timeout*/) {
  if (prefix.size() > kMaxKeyBytes) {
    checkKey(prefix);
  }
  std::lock_guard<std::mutex> lock(mu_);
  ensureOpen();
  engine_.expireKeys(SteadyClock::now());
  return engine_.removePrefix(prefix);
}

bool MemoryStore::check(const std::vector<std::string>& keys, Timeout /*timeout*/) {
  for (const auto& k : keys) {
    checkKey(k);
  }
  std::lock_guard<std::mutex> lock(mu_);
  ensureOpen();
  engine_.expireKeys(SteadyClock::now());
  for (const auto& k : keys) {
    if (engine_.find(k) == nullptr) {
      return false;
    }
  }
  return true;
}

Completion MemoryStore::await(std::unique_lock<std::mutex>& lock, uint64_t pendingId, uint64_t tag,
                              Slot& slot, TimePoint deadline) {
  slots_.emplace(tag, &slot);
  slot.cv.wait_until(lock, deadline, [&] { return slot.done.has_value() || closed_; });
  if (!slot.done && !closed_) {
    engine_.expire(pendingId);  // answers through the slot, synchronously
  }
  slots_.erase(tag);
  if (!slot.done) {
    engine_.dropOwner(kOwner);  // closed: nothing more will be answered
    throw StoreClosed("memory store closed while a call was waiting");
  }
  return std::move(*slot.done);
}

void MemoryStore::wait(const std::vector<std::string>& keys, Timeout timeout) {
  for (const auto& k : keys) {
    checkKey(k);
  }
  const Millis ms = timeout.orDefault(defaultTimeout_);
  const TimePoint deadline = SteadyClock::now() + ms;
  std::unique_lock<std::mutex> lock(mu_);
  ensureOpen();
  engine_.expireKeys(SteadyClock::now());
  const uint64_t tag = nextTag_++;
  const uint64_t id = engine_.wait(keys, kOwner, tag);
  if (id == 0) {
    return;
  }
  Slot slot;
  Completion c = await(lock, id, tag, slot, deadline);
  if (c.kind == Completion::Kind::kWaitTimeout) {
    const std::string message = "wait timed out after " + std::to_string(ms.count()) +
                                " ms; missing keys " + formatKeys(c.missingKeys);
    throw TimeoutError(message, std::move(c.missingKeys));
  }
}

BarrierResult MemoryStore::barrier(const BarrierArrival& arrival, Timeout timeout) {
  checkBarrier(arrival);
  const Millis ms = timeout.orDefault(defaultTimeout_);
  const TimePoint deadline = SteadyClock::now() + ms;
  std::unique_lock<std::mutex> lock(mu_);
  ensureOpen();
  const uint64_t tag = nextTag_++;
  BarrierOutcome out = engine_.barrier(arrival, kOwner, tag);
  switch (out.kind) {
    case BarrierOutcome::Kind::kDone: return out.result;
    case BarrierOutcome::Kind::kOverflow: throw BarrierOverflow(std::move(out.report));
    case BarrierOutcome::Kind::kMismatch: throw InvalidArgument(out.message);
    case BarrierOutcome::Kind::kStale: throw BarrierStale(arrival.name, arrival.generation);
    case BarrierOutcome::Kind::kPending: break;
  }
  Slot slot;
  Completion c = await(lock, out.pendingId, tag, slot, deadline);
  switch (c.kind) {
    case Completion::Kind::kBarrierReleased: return c.result;
    case Completion::Kind::kBarrierTimeout: throw BarrierTimeout(std::move(c.report), ms.count());
    default:
      throw StoreError(StoreErrc::kBarrierStale,
                       "barrier '" + arrival.name + "' was removed while waiting");
  }
}

}  // namespace resilient::store
