#include "store/engine.h"

#include <algorithm>
#include <utility>

namespace resilient::store {
namespace {
// Completed generations kept per barrier name besides the newest: a late or
// repeated arrival for one of them is answered "complete"; an arrival for an
// older, collected one is answered "stale".
constexpr uint64_t kKeptGenerations = 4;
}  // namespace

StoreEngine::StoreEngine(Notify notify, ReleaseSink release)
    : notify_(std::move(notify)), release_(std::move(release)) {}

const std::string* StoreEngine::find(std::string_view key) const {
  auto it = keys_.find(key);
  return it == keys_.end() ? nullptr : &it->second.value;
}

void StoreEngine::storeValue(std::string_view key, std::string value,
                             std::optional<TimePoint> expiry) {
  auto it = keys_.find(key);
  const bool created = it == keys_.end();
  if (created) {
    it = keys_.emplace(std::string(key), Entry{}).first;
  }
  it->second.value = std::move(value);
  it->second.expiryStamp = 0;
  if (expiry) {
    const uint64_t stamp = nextStamp_++;
    it->second.expiryStamp = stamp;
    expiries_.emplace(*expiry, std::make_pair(stamp, it->first));
  }
  if (created) {
    keyAppeared(it->first);
  }
}

void StoreEngine::set(std::string_view key, std::string_view value,
                      std::optional<TimePoint> expiry) {
  storeValue(key, std::string(value), expiry);
}

AddOutcome StoreEngine::add(std::string_view key, int64_t delta) {
  int64_t current = 0;
  if (const std::string* v = find(key)) {
    std::optional<int64_t> parsed = parseCounter(*v);
    if (!parsed) {
      return {};
    }
    current = *parsed;
  }
  int64_t sum = 0;
  if (__builtin_add_overflow(current, delta, &sum)) {
    return {};
  }
  storeValue(key, std::to_string(sum), std::nullopt);
  return {true, sum};
}

CasResult StoreEngine::compareSet(std::string_view key, std::optional<std::string_view> expected,
                                  std::string_view desired) {
  const std::string* current = find(key);
  const bool matches =
      expected ? (current != nullptr && *current == *expected) : current == nullptr;
  if (!matches) {
    return {false, current ? std::optional<std::string>(*current) : std::nullopt};
  }
  storeValue(key, std::string(desired), std::nullopt);
  return {true, std::string(desired)};
}

bool StoreEngine::remove(std::string_view key) {
  auto it = keys_.find(key);
  if (it == keys_.end()) {
    return false;
  }
  keys_.erase(it);
  return true;
}

uint64_t StoreEngine::removePrefix(std::string_view prefix) {
  uint64_t removed = 0;
  for (auto it = keys_.begin(); it != keys_.end();) {
    if (std::string_view(it->first).substr(0, prefix.size()) == prefix) {
      it = keys_.erase(it);
      ++removed;
    } else {
      ++it;
    }
  }
  // Barriers under the prefix: their waiters are answered kDropped first.
  for (auto it = barriers_.lower_bound(BarrierKey{std::string(prefix), 0});
       it != barriers_.end() &&
       std::string_view(it->first.name).substr(0, prefix.size()) == prefix;) {
    const std::vector<BarrierWaiter> waiters = it->second.waiters();
    for (const BarrierWaiter& w : waiters) {
      Completion c;
      c.kind = Completion::Kind::kDropped;
      complete(w.id, c);
    }
    it = barriers_.erase(it);
  }
  for (auto it = series_.lower_bound(prefix);
       it != series_.end() && std::string_view(it->first).substr(0, prefix.size()) == prefix;) {
    it = series_.erase(it);
  }
  return removed;
}

void StoreEngine::keyAppeared(const std::string& key) {
  auto w = keyWaiters_.find(key);
  if (w == keyWaiters_.end()) {
    return;
  }
  std::unordered_set<uint64_t> ids = std::move(w->second);
  keyWaiters_.erase(w);
  for (uint64_t id : ids) {
    auto p = pending_.find(id);
    if (p == pending_.end()) {
      continue;
    }
    auto& keys = p->second.keys;
    keys.erase(std::remove(keys.begin(), keys.end(), key), keys.end());
    if (keys.empty()) {
      Completion c;
      c.kind = Completion::Kind::kWaitReady;
      complete(id, c);
    }
  }
}

uint64_t StoreEngine::wait(const std::vector<std::string>& keys, uint64_t owner, uint64_t tag) {
  std::vector<std::string> missing;
  for (const std::string& key : keys) {
    if (keys_.find(key) == keys_.end() &&
        std::find(missing.begin(), missing.end(), key) == missing.end()) {
      missing.push_back(key);
    }
  }
  if (missing.empty()) {
    return 0;
  }
  const uint64_t id = nextPendingId_++;
  for (const std::string& key : missing) {
    keyWaiters_[key].insert(id);
  }
  Pending p;
  p.owner = owner;
  p.tag = tag;
  p.keys = std::move(missing);
  pending_.emplace(id, std::move(p));
  addToOwner(owner, id);
  return id;
}

void StoreEngine::addToOwner(uint64_t owner, uint64_t id) {
  std::vector<uint64_t>& ids = byOwner_[owner];
  if (ids.size() >= 8) {
    ids.erase(std::remove_if(ids.begin(), ids.end(),
                             [this](uint64_t old) { return pending_.count(old) == 0; }),
              ids.end());
  }
  ids.push_back(id);
}

BarrierOutcome StoreEngine::barrier(const BarrierArrival& arrival, uint64_t owner, uint64_t tag) {
  BarrierOutcome out;
  if (arrival.worldSize <= 0 || arrival.worldSize > kMaxBarrierWorld) {
    out.kind = BarrierOutcome::Kind::kMismatch;
    out.message = "barrier '" + arrival.name + "': world size " +
                  std::to_string(arrival.worldSize) + " is outside [1, " +
                  std::to_string(kMaxBarrierWorld) + "]";
    return out;
  }
  BarrierKey key{arrival.name, arrival.generation};
  auto it = barriers_.find(key);
  if (it == barriers_.end()) {
    auto s = series_.find(arrival.name);
    if (s != series_.end() && arrival.generation < s->second.forgottenBelow) {
      out.kind = BarrierOutcome::Kind::kStale;
      return out;
    }
    it = barriers_.emplace(key, BarrierState(arrival.worldSize)).first;
    series_.try_emplace(arrival.name);
  }
  BarrierState& state = it->second;
  if (state.worldSize() != arrival.worldSize) {
    out.kind = BarrierOutcome::Kind::kMismatch;
    out.message = "barrier '" + arrival.name + "' generation " +
                  std::to_string(arrival.generation) + " counts " +
                  std::to_string(state.worldSize()) + " ranks, but " + arrivalRanksText(arrival) +
                  " arrived declaring " + std::to_string(arrival.worldSize);
    return out;
  }
  // Every rank of the arrival in one step (a node's agent arrives for
  // several): the in-range ones counted, the others recorded as surplus.
  bool surplus = false;
  uint32_t index = 0;
  const bool wasComplete = state.complete();
  for (const int rank : arrivalRanks(arrival)) {
    if (rank < 0 || rank >= arrival.worldSize) {
      state.recordSurplus(rank);
      surplus = true;
    } else if (!wasComplete) {
      const uint32_t i = state.count(rank);
      if (index == 0) {
        index = i;
      }
    }
  }
  if (!wasComplete && state.complete()) {
    releaseBarrier(state);
    collectBarriers(arrival.name, arrival.generation);
  }
  if (surplus) {
    out.kind = BarrierOutcome::Kind::kOverflow;
    out.report = state.report(arrival.name, arrival.generation);
    return out;
  }
  if (state.complete()) {
    out.result = {true, index, state.arrived()};
    return out;
  }
  if (!arrival.waitForRelease) {
    out.result = {false, index, state.arrived()};
    return out;
  }
  const uint64_t id = nextPendingId_++;
  Pending p;
  p.owner = owner;
  p.tag = tag;
  p.isBarrier = true;
  p.barrier = it;
  p.arrivalIndex = index;
  pending_.emplace(id, std::move(p));
  addToOwner(owner, id);
  state.waiters().push_back(BarrierWaiter{id, owner, tag, index});
  out.kind = BarrierOutcome::Kind::kPending;
  out.pendingId = id;
  out.result = {false, index, state.arrived()};
  return out;
}

void StoreEngine::releaseBarrier(BarrierState& state) {
  // The hot path of a large barrier: the waiters' answers come from the
  // barrier's own array; their pending entries are erased afterwards.
  std::vector<BarrierWaiter> waiters = std::move(state.waiters());
  state.waiters().clear();
  if (waiters.empty()) {
    return;
  }
  if (release_) {
    release_(waiters, state.arrived());
    released_.push_back(std::move(waiters));
    return;
  }
  Completion c;
  c.kind = Completion::Kind::kBarrierReleased;
  c.result.completed = true;
  c.result.arrived = state.arrived();
  for (const BarrierWaiter& w : waiters) {
    c.owner = w.owner;
    c.tag = w.tag;
    c.result.arrivalIndex = w.arrivalIndex;
    pending_.erase(w.id);
    notify_(c);
  }
}

void StoreEngine::reap() {
  for (const std::vector<BarrierWaiter>& batch : released_) {
    for (const BarrierWaiter& w : batch) {
      pending_.erase(w.id);
    }
  }
  released_.clear();
}

void StoreEngine::collectBarriers(const std::string& name, uint64_t completedGeneration) {
  if (completedGeneration < kKeptGenerations) {
    return;
  }
  const uint64_t below = completedGeneration - kKeptGenerations;
  Series& series = series_[name];
  for (auto it = barriers_.lower_bound(BarrierKey{name, 0});
       it != barriers_.end() && it->first.name == name && it->first.generation < below;) {
    if (it->second.waiters().empty()) {
      it = barriers_.erase(it);
    } else {
      ++it;
    }
  }
  series.forgottenBelow = std::max(series.forgottenBelow, below);
}

void StoreEngine::complete(uint64_t id, Completion& c) {
  auto p = pending_.find(id);
  if (p == pending_.end()) {
    return;
  }
  c.owner = p->second.owner;
  c.tag = p->second.tag;
  removePending(id);
  notify_(c);
}

void StoreEngine::removePending(uint64_t id) {
  auto p = pending_.find(id);
  if (p == pending_.end()) {
    return;
  }
  Pending& pend = p->second;
  if (pend.isBarrier) {
    pend.barrier->second.removeWaiter(id);
  } else {
    for (const std::string& key : pend.keys) {
      auto w = keyWaiters_.find(key);
      if (w != keyWaiters_.end()) {
        w->second.erase(id);
        if (w->second.empty()) {
          keyWaiters_.erase(w);
        }
      }
    }
  }
  pending_.erase(p);
}

void StoreEngine::expire(uint64_t id) {
  reap();
  auto p = pending_.find(id);
  if (p == pending_.end()) {
    return;
  }
  Completion c;
  if (p->second.isBarrier) {
    c.kind = Completion::Kind::kBarrierTimeout;
    const auto& b = p->second.barrier;
    c.report = b->second.report(b->first.name, b->first.generation);
  } else {
    c.kind = Completion::Kind::kWaitTimeout;
    c.missingKeys = p->second.keys;
  }
  complete(id, c);
}

void StoreEngine::dropOwner(uint64_t owner) {
  reap();
  auto o = byOwner_.find(owner);
  if (o == byOwner_.end()) {
    return;
  }
  const std::vector<uint64_t> ids = std::move(o->second);
  byOwner_.erase(o);
  for (uint64_t id : ids) {
    removePending(id);
  }
}

void StoreEngine::expireKeys(TimePoint now) {
  while (!expiries_.empty() && expiries_.begin()->first <= now) {
    auto row = expiries_.begin();
    auto it = keys_.find(row->second.second);
    if (it != keys_.end() && it->second.expiryStamp == row->second.first) {
      keys_.erase(it);
    }
    expiries_.erase(row);
  }
}

std::optional<TimePoint> StoreEngine::nextKeyExpiry() const {
  if (expiries_.empty()) {
    return std::nullopt;
  }
  return expiries_.begin()->first;
}

}  // namespace resilient::store
