#include "store/etcd/store_protocol.h"

#include <algorithm>
#include <cstdio>
#include <random>
#include <unordered_set>

#include "store/errors.h"
#include "store/etcd/kv_api.h"

namespace resilient::store::etcd {
namespace {

using Json = nlohmann::json;
using kv::Cmp;

std::string padded(uint64_t v, int width) {
  std::string s = std::to_string(v);
  if (static_cast<int>(s.size()) < width) {
    s.insert(0, static_cast<size_t>(width - static_cast<int>(s.size())), '0');
  }
  return s;
}

}  // namespace

const std::string kMarkerRoot("\0resilient/op/", 14);

std::string newClientId() {
  std::random_device rd;
  const uint64_t v = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string markerKey(std::string_view clientId, uint64_t seq) {
  return kMarkerRoot + std::string(clientId) + "/" + std::to_string(seq);
}

int64_t markerLeaseSeconds(Millis defaultTimeout) {
  return defaultTimeout.count() / 1000 + 120;
}

BarrierKeys::BarrierKeys(const BarrierArrival& a)
    : base(a.name + std::string("\0b/", 3) + padded(a.generation, 20) + "/") {}

std::string BarrierKeys::rank(int r) const {
  return ranks() + padded(static_cast<uint64_t>(r), 8);
}

std::string BarrierKeys::count(int i) const {
  return counts() + padded(static_cast<uint64_t>(i), 8);
}

namespace {

// The arrival's ranks, each once, in order: a transaction may put a key only
// once, and a rank named twice is counted once anyway.
std::vector<int> distinctRanks(const BarrierArrival& a) {
  std::vector<int> ranks = arrivalRanks(a);
  std::unordered_set<int> seen;
  seen.reserve(ranks.size());
  ranks.erase(
      std::remove_if(ranks.begin(), ranks.end(), [&](int r) { return !seen.insert(r).second; }),
      ranks.end());
  return ranks;
}

}  // namespace

BarrierArrivalSteps::BarrierArrivalSteps(const BarrierArrival& a)
    : arrival_(a), pending_(distinctRanks(a)), keys_(a), world_(std::to_string(a.worldSize)) {}

namespace {

// The count of ranks the count/ keys say (the sum of their versions).
int64_t countOf(const Json& rangeAnswer) {
  int64_t n = 0;
  for (const kv::KeyValue& c : kv::kvs(rangeAnswer)) {
    n += c.version;
  }
  return n;
}

Json countRange(const BarrierKeys& keys) {
  kv::RangeOptions all;
  all.rangeEnd = kv::prefixEnd(keys.counts());
  return kv::opRange(kv::range(keys.counts(), all));
}

Json doneRange(const BarrierKeys& keys) {
  kv::RangeOptions countOne;
  countOne.countOnly = true;
  return kv::opRange(kv::range(keys.done(), countOne));
}

// Success branch: count the ranks, read the count and `done`.
Json countOps(const BarrierKeys& keys, const std::vector<int>& ranks) {
  Json ops = Json::array();
  for (const int r : ranks) {
    ops.push_back(kv::opPut(kv::put(keys.rank(r), "")));
  }
  for (size_t i = 0; i < ranks.size(); ++i) {
    ops.push_back(kv::opPut(kv::put(keys.count(static_cast<int>(i)), "")));
  }
  ops.push_back(countRange(keys));
  ops.push_back(doneRange(keys));
  return ops;
}

// Failure branch: why the compares failed (world, each rank), and the count
// as it stands.
Json explainOps(const BarrierKeys& keys, const std::vector<int>& ranks) {
  kv::RangeOptions countOne;
  countOne.countOnly = true;
  Json ops = Json::array({kv::opRange(kv::range(keys.world()))});
  for (const int r : ranks) {
    ops.push_back(kv::opRange(kv::range(keys.rank(r), countOne)));
  }
  ops.push_back(countRange(keys));
  ops.push_back(doneRange(keys));
  return ops;
}

// Ranks per transaction: each takes two puts (r/<rank>, count/<i>); two reads
// follow, and the first arrival puts `world` too (etcd refuses a branch of
// more than --max-txn-ops operations, 128 by default: kMaxAtomicKeys).
constexpr size_t kRanksPerTxn = (kMaxAtomicKeys - 3) / 2;

}  // namespace

EtcdRequest BarrierArrivalSteps::arriveRequest() {
  chunk_.assign(pending_.begin(),
                pending_.begin() + static_cast<std::ptrdiff_t>(std::min(pending_.size(), kRanksPerTxn)));
  Json compares = Json::array({kv::compareValue(keys_.world(), Cmp::kEqual, world_)});
  for (const int r : chunk_) {
    compares.push_back(kv::compareVersion(keys_.rank(r), Cmp::kEqual, 0));
  }
  return {kv::kTxnPath,
          kv::txn(std::move(compares), countOps(keys_, chunk_), explainOps(keys_, chunk_))};
}

EtcdRequest BarrierArrivalSteps::createRequest() {
  chunk_.assign(pending_.begin(),
                pending_.begin() + static_cast<std::ptrdiff_t>(std::min(pending_.size(), kRanksPerTxn)));
  Json create = countOps(keys_, chunk_);
  create.insert(create.begin(), kv::opPut(kv::put(keys_.world(), world_)));
  return {kv::kTxnPath, kv::txn(Json::array({kv::compareVersion(keys_.world(), Cmp::kEqual, 0)}),
                                std::move(create), explainOps(keys_, chunk_))};
}

std::optional<EtcdRequest> BarrierArrivalSteps::next(const Json& answer) {
  switch (stage_) {
    case Stage::kArrive:
    case Stage::kCreate: {
      if (!kv::succeeded(answer)) {
        return notCounted(answer);
      }
      // The success branch: [put world,] n x put r/<rank>, n x put
      // count/<i>, the count/ keys, done.
      const size_t first = (stage_ == Stage::kCreate ? 1 : 0) + 2 * chunk_.size();
      revision_ = kv::revision(answer);
      const int64_t count = countOf(kv::txnResponse(answer, first));
      if (result_.arrivalIndex == 0) {
        result_.arrivalIndex = static_cast<uint32_t>(count - static_cast<int64_t>(chunk_.size()) + 1);
      }
      pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(chunk_.size()));
      const bool done = kv::count(kv::txnResponse(answer, first + 1)) > 0;
      if (!pending_.empty() && !done && count < arrival_.worldSize) {
        stage_ = Stage::kArrive;  // the next transaction's worth of ranks
        return arriveRequest();
      }
      return counted(count, done);
    }
    case Stage::kRelease:
    case Stage::kSettled: stage_ = Stage::kSettled; return std::nullopt;
  }
  return std::nullopt;
}

std::optional<EtcdRequest> BarrierArrivalSteps::notCounted(const Json& answer) {
  const std::vector<kv::KeyValue> w = kv::kvs(kv::txnResponse(answer, 0));
  if (w.empty()) {
    if (attempt_++ > 8) {
      throw BackendError("barrier '" + arrival_.name + "': could not record the arrival");
    }
    stage_ = Stage::kCreate;  // the first arrival: record the world size
    return createRequest();
  }
  if (w.front().value != world_) {
    throw InvalidArgument("barrier '" + arrival_.name + "' generation " +
                          std::to_string(arrival_.generation) + " counts " + w.front().value +
                          " ranks, but " + arrivalRanksText(arrival_) +
                          " arrived declaring " + world_);
  }
  // Ranks counted already (a retry of an applied attempt, or a third party)
  // are done; the others go again.
  std::vector<int> left;
  for (size_t i = 0; i < chunk_.size(); ++i) {
    if (kv::count(kv::txnResponse(answer, 1 + i)) == 0) {
      left.push_back(chunk_[i]);
    }
  }
  const size_t after = 1 + chunk_.size();
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(chunk_.size()));
  pending_.insert(pending_.begin(), left.begin(), left.end());
  if (!pending_.empty()) {
    // `world` appeared between our two transactions, or some of the ranks
    // were counted: arrive again with the others.
    if (attempt_++ > 8) {
      throw BackendError("barrier '" + arrival_.name + "': could not record the arrival");
    }
    stage_ = Stage::kArrive;
    return arriveRequest();
  }
  revision_ = kv::revision(answer);
  return counted(countOf(kv::txnResponse(answer, after)),
                 kv::count(kv::txnResponse(answer, after + 1)) > 0);
}

std::optional<EtcdRequest> BarrierArrivalSteps::counted(int64_t count, bool done) {
  result_.arrived = static_cast<uint32_t>(count);
  if (done || count >= arrival_.worldSize) {
    result_.completed = true;
    result_.arrived = static_cast<uint32_t>(arrival_.worldSize);
    if (!done) {
      stage_ = Stage::kRelease;  // releases every watcher
      return EtcdRequest{kv::kPutPath, kv::put(keys_.done(), "")};
    }
  }
  stage_ = Stage::kSettled;
  return std::nullopt;
}

CounterAddSteps::CounterAddSteps(std::string_view key, int64_t delta, std::string marker)
    : key_(key), delta_(delta), marker_(std::move(marker)) {}

EtcdRequest CounterAddSteps::read() const {
  return {kv::kRangePath, kv::range(key_)};
}

void CounterAddSteps::take(const std::optional<std::string>& current, int64_t modRevision) {
  int64_t value = 0;
  mod_ = 0;
  if (current) {
    std::optional<int64_t> parsed = parseCounter(*current);
    if (!parsed) {
      throw InvalidArgument("add on key '" + key_ + "': the stored value is not a decimal int64");
    }
    value = *parsed;
    mod_ = modRevision;
  }
  int64_t sum = 0;
  if (__builtin_add_overflow(value, delta_, &sum)) {
    throw InvalidArgument("add on key '" + key_ + "': the sum overflows");
  }
  text_ = std::to_string(sum);
}

void CounterAddSteps::onRead(const Json& rangeAnswer) {
  const std::vector<kv::KeyValue> current = kv::kvs(rangeAnswer);
  if (current.empty()) {
    take(std::nullopt, 0);
  } else {
    take(current.front().value, current.front().modRevision);
  }
}

EtcdRequest CounterAddSteps::txn(int64_t lease) const {
  // Applied only if nobody changed the counter since we read it, and only
  // once: a retry after an ambiguous failure finds the marker.
  return {kv::kTxnPath,
          kv::txn(Json::array({mod_ == 0 ? kv::compareVersion(key_, Cmp::kEqual, 0)
                                         : kv::compareMod(key_, Cmp::kEqual, mod_),
                               kv::compareVersion(marker_, Cmp::kEqual, 0)}),
                  Json::array(
                      {kv::opPut(kv::put(key_, text_)), kv::opPut(kv::put(marker_, text_, lease))}),
                  Json::array({kv::opRange(kv::range(key_)), kv::opRange(kv::range(marker_))}))};
}

std::optional<int64_t> CounterAddSteps::onTxn(const Json& answer) {
  if (kv::succeeded(answer)) {
    return std::stoll(text_);
  }
  const std::vector<kv::KeyValue> mine = kv::kvs(kv::txnResponse(answer, 1));
  if (!mine.empty()) {
    return std::stoll(mine.front().value);  // our earlier attempt was applied
  }
  // Someone else's add came first.
  const std::vector<kv::KeyValue> current = kv::kvs(kv::txnResponse(answer, 0));
  if (current.empty()) {
    take(std::nullopt, 0);
  } else {
    take(current.front().value, current.front().modRevision);
  }
  return std::nullopt;
}

}  // namespace resilient::store::etcd
