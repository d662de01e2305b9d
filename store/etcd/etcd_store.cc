#include "store/etcd/etcd_store.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <unordered_map>

#include "store/errors.h"
#include "store/etcd/kv_api.h"
#include "store/etcd/store_protocol.h"
#include "store/etcd/watch.h"

namespace resilient::store::etcd {
namespace {

using Json = nlohmann::json;
using kv::Cmp;

template <class F>
void inChunks(size_t n, F&& f) {
  for (size_t begin = 0; begin < n; begin += kMaxAtomicKeys) {
    f(begin, std::min(n, begin + kMaxAtomicKeys));
  }
}

}  // namespace

EtcdStore::EtcdStore(std::vector<std::string> endpoints, ClientOptions options)
    : rpc_(std::move(endpoints), std::move(options)), clientId_(newClientId()) {
  // Reach one member, retrying (with backoff, member after member) until the
  // connect timeout: the cluster may come up after its clients.
  call("/v3/kv/range", kv::range(kMarkerRoot + clientId_, {{}, true}),
       SteadyClock::now() + rpc_.options().connectTimeout);
}

TimePoint EtcdStore::graceDeadline(TimePoint deadline) const {
  return std::max(deadline, SteadyClock::now() + rpc_.options().memberTimeout);
}

TimePoint EtcdStore::deadlineOf(Timeout t) const {
  return SteadyClock::now() + t.orDefault(rpc_.options().defaultTimeout);
}

Json EtcdStore::call(std::string_view path, const Json& body, TimePoint deadline) {
  return rpc_.call(path, body, deadline);
}

std::string EtcdStore::newMarker() {
  return markerKey(clientId_, opSeq_.fetch_add(1));
}

int64_t EtcdStore::markerLease(TimePoint deadline, bool renew) {
  std::lock_guard<std::mutex> lock(leaseMu_);
  const TimePoint now = SteadyClock::now();
  if (lease_ == 0 || renew || now >= leaseRenewAt_) {
    // Markers must outlive any retry of their operation: a call's timeout.
    const int64_t ttl = markerLeaseSeconds(rpc_.options().defaultTimeout);
    Json answer = call("/v3/lease/grant", kv::leaseGrant(ttl), deadline);
    lease_ = jsonInt(answer, "ID");
    leaseRenewAt_ = now + std::chrono::seconds(ttl / 2);
  }
  return lease_;
}

Json EtcdStore::markedTxn(const std::function<Json(int64_t)>& build, TimePoint deadline) {
  try {
    return call("/v3/kv/txn", build(markerLease(deadline)), deadline);
  } catch (const LeaseNotFound&) {
    return call("/v3/kv/txn", build(markerLease(deadline, true)), deadline);
  }
}

void EtcdStore::set(std::string_view key, std::string_view value, Timeout timeout) {
  checkKey(key);
  checkValue(value);
  call("/v3/kv/put", kv::put(key, value), deadlineOf(timeout));
}

// Expiring keys: each call grants a lease of the TTL and puts its keys on
// it. A key written again moves to the new call's lease; a lease of ours
// whose every key has moved on has no more use and is revoked, so a key
// refreshed every second keeps one lease alive, not ttl of them. A lease is
// revoked only when this client saw all its keys move: one of a batch
// (setExpiringMany) still holds the batch's other keys when one of them is
// refreshed alone, and a lease another client granted is never ours to
// revoke (it expires on its own).
int64_t EtcdStore::grantExpiring(Millis ttl, size_t keys, TimePoint deadline) {
  // etcd leases count whole seconds (and round up to the cluster's minimum).
  const int64_t seconds = std::max<int64_t>(1, (ttl.count() + 999) / 1000);
  const Json answer = call("/v3/lease/grant", kv::leaseGrant(seconds), deadline);
  const int64_t lease = jsonInt(answer, "ID");
  int64_t granted = seconds;
  if (answer.contains("TTL")) {
    granted = std::max(granted, jsonInt(answer, "TTL"));
  }
  const TimePoint now = SteadyClock::now();
  std::lock_guard<std::mutex> lock(expiringMu_);
  if (expiringLeases_.size() >= 256) {
    // Expired ones are gone from etcd too: forget them.
    for (auto it = expiringLeases_.begin(); it != expiringLeases_.end();) {
      it = it->second.expires <= now ? expiringLeases_.erase(it) : std::next(it);
    }
  }
  expiringLeases_[lease] = {keys, now + std::chrono::seconds(granted + 1)};
  return lease;
}

void EtcdStore::movedOff(const std::vector<int64_t>& previous, TimePoint deadline) {
  std::vector<int64_t> empty;
  {
    std::lock_guard<std::mutex> lock(expiringMu_);
    for (const int64_t old : previous) {
      auto it = expiringLeases_.find(old);
      if (it == expiringLeases_.end()) {
        continue;  // another client's, or forgotten: it expires on its own
      }
      if (--it->second.keys == 0) {
        empty.push_back(old);
        expiringLeases_.erase(it);
      }
    }
  }
  for (const int64_t old : empty) {
    try {
      call("/v3/lease/revoke", Json{{"ID", std::to_string(old)}},
           std::min(deadline, SteadyClock::now() + rpc_.options().memberTimeout));
    } catch (const StoreError&) {
      // Expired already, or etcd busy: it expires on its own.
    }
  }
}

void EtcdStore::forgetExpiring(int64_t lease) {
  std::lock_guard<std::mutex> lock(expiringMu_);
  expiringLeases_.erase(lease);
}

namespace {

// The lease a put's previous value was on, if another than `lease`.
void collectPrevious(const Json& put, int64_t lease, std::vector<int64_t>* previous) {
  if (auto prev = put.find("prev_kv"); prev != put.end()) {
    const int64_t old = jsonInt(*prev, "lease");
    if (old != 0 && old != lease) {
      previous->push_back(old);
    }
  }
}

// The pairs with each key once, holding its last value (as writing them in
// order would leave it): etcd refuses a transaction that puts a key twice.
std::vector<KeyValue> lastOfEachKey(const std::vector<KeyValue>& pairs) {
  std::unordered_map<std::string_view, size_t> at;
  at.reserve(pairs.size());
  std::vector<KeyValue> out;
  out.reserve(pairs.size());
  for (const auto& [k, v] : pairs) {
    auto [it, fresh] = at.try_emplace(k, out.size());
    if (fresh) {
      out.emplace_back(k, v);
    } else {
      out[it->second].second = v;
    }
  }
  return out;
}

}  // namespace

void EtcdStore::setExpiring(std::string_view key, std::string_view value, Millis ttl,
                            Timeout timeout) {
  checkKey(key);
  checkValue(value);
  const TimePoint deadline = deadlineOf(timeout);
  for (int attempt = 0;; ++attempt) {
    const int64_t lease = grantExpiring(ttl, 1, deadline);
    Json put;
    try {
      put = call("/v3/kv/put", kv::put(key, value, lease, true), deadline);
    } catch (const LeaseNotFound&) {
      // Expired before the put reached etcd (a TTL shorter than the call).
      forgetExpiring(lease);
      if (attempt < 2) {
        continue;
      }
      throw;
    }
    std::vector<int64_t> previous;
    collectPrevious(put, lease, &previous);
    movedOff(previous, deadline);
    return;
  }
}

void EtcdStore::setExpiringMany(const std::vector<KeyValue>& pairs, Millis ttl,
                                Timeout timeout) {
  for (const auto& [k, v] : pairs) {
    checkKey(k);
    checkValue(v);
  }
  if (pairs.empty()) {
    return;
  }
  const std::vector<KeyValue> unique = lastOfEachKey(pairs);
  const TimePoint deadline = deadlineOf(timeout);
  // One lease for the batch (a node's heartbeats), one transaction per
  // kMaxAtomicKeys keys.
  int64_t lease = grantExpiring(ttl, unique.size(), deadline);
  std::vector<int64_t> previous;
  int regrants = 0;
  for (size_t begin = 0; begin < unique.size();) {
    const size_t end = std::min(unique.size(), begin + kMaxAtomicKeys);
    Json ops = Json::array();
    for (size_t i = begin; i < end; ++i) {
      ops.push_back(kv::opPut(kv::put(unique[i].first, unique[i].second, lease, true)));
    }
    Json answer;
    try {
      answer = call("/v3/kv/txn", kv::txn(Json::array(), std::move(ops)), deadline);
    } catch (const LeaseNotFound&) {
      // The lease expired while the batch was being written (a TTL shorter
      // than the call): the rest goes on a new one.
      forgetExpiring(lease);
      if (regrants++ >= 2) {
        throw;
      }
      lease = grantExpiring(ttl, unique.size() - begin, deadline);
      continue;
    }
    for (size_t i = 0; i < end - begin; ++i) {
      collectPrevious(kv::txnResponse(answer, i), lease, &previous);
    }
    begin = end;
  }
  movedOff(previous, deadline);
}

std::optional<std::string> EtcdStore::get(std::string_view key, Timeout timeout) {
  checkKey(key);
  const std::vector<kv::KeyValue> found =
      kv::kvs(call("/v3/kv/range", kv::range(key), deadlineOf(timeout)));
  if (found.empty()) {
    return std::nullopt;
  }
  return found.front().value;
}

int64_t EtcdStore::add(std::string_view key, int64_t delta, Timeout timeout) {
  checkKey(key);
  const TimePoint deadline = deadlineOf(timeout);
  CounterAddSteps steps(key, delta, newMarker());
  const EtcdRequest read = steps.read();
  steps.onRead(call(read.path, read.body, deadline));
  for (;;) {
    const Json answer = markedTxn([&](int64_t lease) { return steps.txn(lease).body; }, deadline);
    if (std::optional<int64_t> sum = steps.onTxn(answer)) {
      return *sum;
    }
  }
}

CasResult EtcdStore::compareSet(std::string_view key, std::optional<std::string_view> expected,
                                std::string_view desired, Timeout timeout) {
  checkKey(key);
  checkValue(desired);
  if (expected) {
    checkValue(*expected);
  }
  const TimePoint deadline = deadlineOf(timeout);
  const std::string marker = newMarker();
  Json answer = markedTxn(
      [&](int64_t lease) {
        return kv::txn(
            Json::array({expected ? kv::compareValue(key, Cmp::kEqual, *expected)
                                  : kv::compareVersion(key, Cmp::kEqual, 0),
                         kv::compareVersion(marker, Cmp::kEqual, 0)}),
            Json::array({kv::opPut(kv::put(key, desired)), kv::opPut(kv::put(marker, "1", lease))}),
            Json::array({kv::opRange(kv::range(key)), kv::opRange(kv::range(marker))}));
      },
      deadline);
  if (kv::succeeded(answer) || !kv::kvs(kv::txnResponse(answer, 1)).empty()) {
    return {true, std::string(desired)};
  }
  const std::vector<kv::KeyValue> current = kv::kvs(kv::txnResponse(answer, 0));
  if (current.empty()) {
    return {false, std::nullopt};
  }
  return {false, current.front().value};
}

std::vector<std::optional<std::string>> EtcdStore::multiGet(const std::vector<std::string>& keys,
                                                            Timeout timeout) {
  for (const auto& k : keys) {
    checkKey(k);
  }
  const TimePoint deadline = deadlineOf(timeout);
  std::vector<std::optional<std::string>> out(keys.size());
  int64_t revision = 0;  // every chunk reads the first chunk's revision: one snapshot
  inChunks(keys.size(), [&](size_t begin, size_t end) {
    Json ops = Json::array();
    for (size_t i = begin; i < end; ++i) {
      kv::RangeOptions o;
      o.revision = revision;
      ops.push_back(kv::opRange(kv::range(keys[i], o)));
    }
    Json answer = call("/v3/kv/txn", kv::txn(Json::array(), std::move(ops)), deadline);
    if (revision == 0) {
      revision = kv::revision(answer);
    }
    for (size_t i = begin; i < end; ++i) {
      std::vector<kv::KeyValue> found = kv::kvs(kv::txnResponse(answer, i - begin));
      if (!found.empty()) {
        out[i] = std::move(found.front().value);
      }
    }
  });
  return out;
}

void EtcdStore::multiSet(const std::vector<KeyValue>& pairs, Timeout timeout) {
  for (const auto& [k, v] : pairs) {
    checkKey(k);
    checkValue(v);
  }
  const TimePoint deadline = deadlineOf(timeout);
  const std::vector<KeyValue> unique = lastOfEachKey(pairs);
  inChunks(unique.size(), [&](size_t begin, size_t end) {
    Json ops = Json::array();
    for (size_t i = begin; i < end; ++i) {
      ops.push_back(kv::opPut(kv::put(unique[i].first, unique[i].second)));
    }
    call("/v3/kv/txn", kv::txn(Json::array(), std::move(ops)), deadline);
  });
}

bool EtcdStore::remove(std::string_view key, Timeout timeout) {
  checkKey(key);
  const TimePoint deadline = deadlineOf(timeout);
  const std::string marker = newMarker();
  Json answer = markedTxn(
      [&](int64_t lease) {
        return kv::txn(Json::array({kv::compareVersion(key, Cmp::kGreater, 0),
                                    kv::compareVersion(marker, Cmp::kEqual, 0)}),
                       Json::array({kv::opDelete(kv::deleteRange(key)),
                                    kv::opPut(kv::put(marker, "1", lease))}),
                       Json::array({kv::opRange(kv::range(marker, {{}, true}))}));
      },
      deadline);
  // Failed: the key was absent, unless our earlier attempt deleted it.
  return kv::succeeded(answer) || kv::count(kv::txnResponse(answer, 0)) > 0;
}

uint64_t EtcdStore::removePrefix(std::string_view prefix, Timeout timeout) {
  if (prefix.size() > kMaxKeyBytes) {
    checkKey(prefix);
  }
  const std::string from = prefix.empty() ? std::string(1, '\0') : std::string(prefix);
  const Json answer =
      call("/v3/kv/deleterange", kv::deleteRange(from, kv::prefixEnd(prefix)), deadlineOf(timeout));
  return static_cast<uint64_t>(jsonInt(answer, "deleted"));
}

std::vector<bool> EtcdStore::existing(const std::vector<std::string>& keys, TimePoint deadline,
                                      int64_t* revision) {
  std::vector<bool> out(keys.size(), false);
  int64_t rev = 0;
  inChunks(keys.size(), [&](size_t begin, size_t end) {
    Json ops = Json::array();
    for (size_t i = begin; i < end; ++i) {
      kv::RangeOptions o;
      o.countOnly = true;
      o.revision = rev;
      ops.push_back(kv::opRange(kv::range(keys[i], o)));
    }
    Json answer = call("/v3/kv/txn", kv::txn(Json::array(), std::move(ops)), deadline);
    if (rev == 0) {
      rev = kv::revision(answer);
    }
    for (size_t i = begin; i < end; ++i) {
      out[i] = kv::count(kv::txnResponse(answer, i - begin)) > 0;
    }
  });
  if (revision != nullptr) {
    if (rev == 0) {
      rev = kv::revision(call("/v3/kv/range", kv::range(kMarkerRoot, {{}, true}), deadline));
    }
    *revision = rev;
  }
  return out;
}

bool EtcdStore::check(const std::vector<std::string>& keys, Timeout timeout) {
  for (const auto& k : keys) {
    checkKey(k);
  }
  const std::vector<bool> have = existing(keys, deadlineOf(timeout), nullptr);
  return std::all_of(have.begin(), have.end(), [](bool b) { return b; });
}

void EtcdStore::wait(const std::vector<std::string>& keys, Timeout timeout) {
  for (const auto& k : keys) {
    checkKey(k);
  }
  const Millis ms = timeout.orDefault(rpc_.options().defaultTimeout);
  const TimePoint deadline = SteadyClock::now() + ms;
  int64_t revision = 0;
  // The first read gets at least one member timeout, as a TCP store's wait
  // gets a grace period: a wait with timeout 0 is a check.
  std::vector<bool> have = existing(keys, graceDeadline(deadline), &revision);
  for (size_t i = 0; i < keys.size(); ++i) {
    if (have[i] || watchForPut(rpc_, keys[i], revision + 1, deadline)) {
      have[i] = true;
      continue;
    }
    // Timed out: name exactly what is still absent (best effort, briefly).
    try {
      have = existing(keys, SteadyClock::now() + rpc_.options().memberTimeout, nullptr);
    } catch (const StoreError&) {
    }
    std::vector<std::string> missing;
    for (size_t j = 0; j < keys.size(); ++j) {
      if (!have[j]) {
        missing.push_back(keys[j]);
      }
    }
    if (missing.empty()) {
      return;  // appeared at the last moment
    }
    const std::string message = "wait timed out after " + std::to_string(ms.count()) +
                                " ms; missing keys " + formatKeys(missing);
    throw TimeoutError(message, std::move(missing));
  }
}

BarrierReport EtcdStore::barrierReport(const BarrierArrival& a, TimePoint deadline) {
  const BarrierKeys keys(a);
  BarrierReport r;
  r.name = a.name;
  r.generation = a.generation;
  r.worldSize = a.worldSize;
  kv::RangeOptions o;
  o.keysOnly = true;
  o.rangeEnd = kv::prefixEnd(keys.ranks());
  Json answer = call(
      "/v3/kv/txn",
      kv::txn(Json::array(), Json::array({kv::opRange(kv::range(keys.ranks(), o)),
                                          kv::opRange(kv::range(keys.surplus(),
                                                                [&] {
                                                                  kv::RangeOptions s = o;
                                                                  s.rangeEnd =
                                                                      kv::prefixEnd(keys.surplus());
                                                                  return s;
                                                                }()))})),
      deadline);
  std::vector<uint8_t> counted(static_cast<size_t>(a.worldSize), 0);
  for (const auto& k : kv::kvs(kv::txnResponse(answer, 0))) {
    const int rank = std::stoi(k.key.substr(keys.ranks().size()));
    if (rank >= 0 && rank < a.worldSize && counted[static_cast<size_t>(rank)] == 0) {
      counted[static_cast<size_t>(rank)] = 1;
      ++r.arrived;
    }
  }
  for (size_t i = 0; i < counted.size(); ++i) {
    if (counted[i] == 0) {
      r.missingRanks.push_back(static_cast<int>(i));
    }
  }
  for (const auto& k : kv::kvs(kv::txnResponse(answer, 1))) {
    r.surplusRanks.push_back(std::stoi(k.key.substr(keys.surplus().size())));
  }
  std::sort(r.surplusRanks.begin(), r.surplusRanks.end());
  return r;
}

BarrierResult EtcdStore::barrier(const BarrierArrival& a, Timeout timeout) {
  checkBarrier(a);
  const Millis ms = timeout.orDefault(rpc_.options().defaultTimeout);
  const TimePoint deadline = SteadyClock::now() + ms;
  BarrierArrival counting = a;
  counting.ranks.clear();
  std::set<int> surplus;
  for (const int r : arrivalRanks(a)) {
    if (r < 0 || r >= a.worldSize) {
      surplus.insert(r);
    } else {
      counting.ranks.push_back(r);
    }
  }
  // Surplus ranks are named under s/ (one transaction per kMaxAtomicKeys),
  // then the call overflows, as for a single surplus rank.
  const auto overflow = [&] {
    const std::vector<int> named(surplus.begin(), surplus.end());
    inChunks(named.size(), [&](size_t begin, size_t end) {
      Json ops = Json::array();
      for (size_t i = begin; i < end; ++i) {
        ops.push_back(kv::opPut(kv::put(BarrierKeys(a).surplus() + std::to_string(named[i]), "")));
      }
      call("/v3/kv/txn", kv::txn(Json::array(), std::move(ops)), deadline);
    });
    throw BarrierOverflow(barrierReport(a, deadline));
  };
  if (counting.ranks.empty()) {
    overflow();
  }
  counting.rank = counting.ranks.front();
  // One transaction counts the ranks (and reads the count); the first
  // arrival records the world size, the last one puts `done`.
  BarrierArrivalSteps steps(counting);
  const TimePoint arriveBy = graceDeadline(deadline);
  EtcdRequest request = steps.first();
  for (;;) {
    std::optional<EtcdRequest> next = steps.next(call(request.path, request.body, arriveBy));
    if (!next) {
      break;
    }
    request = std::move(*next);
  }
  BarrierResult result = steps.result();
  if (!surplus.empty()) {
    overflow();  // the in-range ranks are counted
  }
  if (result.completed) {
    return result;
  }
  if (!a.waitForRelease) {
    return result;
  }
  if (watchForPut(rpc_, steps.watchKey(), steps.watchFrom(), deadline)) {
    result.completed = true;
    result.arrived = static_cast<uint32_t>(a.worldSize);
    return result;
  }
  BarrierReport report;
  try {
    report = barrierReport(a, SteadyClock::now() + rpc_.options().memberTimeout);
  } catch (const StoreError&) {
    report.name = a.name;
    report.generation = a.generation;
    report.worldSize = a.worldSize;
  }
  if (report.missingRanks.empty() && !report.name.empty() &&
      report.arrived == static_cast<uint32_t>(a.worldSize)) {
    // Complete at the very end (the last rank arrived as we gave up).
    result.completed = true;
    result.arrived = report.arrived;
    return result;
  }
  throw BarrierTimeout(std::move(report), ms.count());
}

}  // namespace resilient::store::etcd
