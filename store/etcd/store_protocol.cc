#include "store/etcd/store_protocol.h"

#include <cstdio>
#include <random>

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

BarrierArrivalSteps::BarrierArrivalSteps(const BarrierArrival& a)
    : arrival_(a), keys_(a), world_(std::to_string(a.worldSize)) {}

namespace {

// The count of ranks the `count` key says (its version; 0 when absent).
int64_t countOf(const Json& rangeAnswer) {
  const std::vector<kv::KeyValue> c = kv::kvs(rangeAnswer);
  return c.empty() ? 0 : c.front().version;
}

// Success branch: count the rank, read the count and `done`.
Json countOps(const BarrierKeys& keys, int rank) {
  kv::RangeOptions countOne;
  countOne.countOnly = true;
  return Json::array({kv::opPut(kv::put(keys.rank(rank), "")), kv::opPut(kv::put(keys.count(), "")),
                      kv::opRange(kv::range(keys.count())),
                      kv::opRange(kv::range(keys.done(), countOne))});
}

// Failure branch: why the compares failed, and the count as it stands.
Json explainOps(const BarrierKeys& keys, int rank) {
  kv::RangeOptions countOne;
  countOne.countOnly = true;
  return Json::array(
      {kv::opRange(kv::range(keys.world())), kv::opRange(kv::range(keys.rank(rank), countOne)),
       kv::opRange(kv::range(keys.count())), kv::opRange(kv::range(keys.done(), countOne))});
}

}  // namespace

EtcdRequest BarrierArrivalSteps::arriveRequest() const {
  return {kv::kTxnPath,
          kv::txn(Json::array({kv::compareValue(keys_.world(), Cmp::kEqual, world_),
                               kv::compareVersion(keys_.rank(arrival_.rank), Cmp::kEqual, 0)}),
                  countOps(keys_, arrival_.rank), explainOps(keys_, arrival_.rank))};
}

EtcdRequest BarrierArrivalSteps::createRequest() const {
  Json create = countOps(keys_, arrival_.rank);
  create.insert(create.begin(), kv::opPut(kv::put(keys_.world(), world_)));
  return {kv::kTxnPath, kv::txn(Json::array({kv::compareVersion(keys_.world(), Cmp::kEqual, 0)}),
                                std::move(create), explainOps(keys_, arrival_.rank))};
}

std::optional<EtcdRequest> BarrierArrivalSteps::next(const Json& answer) {
  switch (stage_) {
    case Stage::kArrive:
    case Stage::kCreate: {
      if (!kv::succeeded(answer)) {
        return notCounted(answer);
      }
      // The success branch: [put world,] put r/<rank>, put count, count, done.
      const size_t first = stage_ == Stage::kCreate ? 3 : 2;
      revision_ = kv::revision(answer);
      const int64_t count = countOf(kv::txnResponse(answer, first));
      result_.arrivalIndex = static_cast<uint32_t>(count);
      return counted(count, kv::count(kv::txnResponse(answer, first + 1)) > 0);
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
                          " ranks, but rank " + std::to_string(arrival_.rank) +
                          " arrived declaring " + world_);
  }
  if (kv::count(kv::txnResponse(answer, 1)) == 0) {
    // `world` appeared between our two transactions: arrive again.
    if (attempt_++ > 8) {
      throw BackendError("barrier '" + arrival_.name + "': could not record the arrival");
    }
    stage_ = Stage::kArrive;
    return arriveRequest();
  }
  // Counted already (a retry of an applied attempt, or a third party).
  revision_ = kv::revision(answer);
  result_.arrivalIndex = 0;
  return counted(countOf(kv::txnResponse(answer, 2)), kv::count(kv::txnResponse(answer, 3)) > 0);
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
