// The key operations of EtcdStore's barrier arrival and counter add, as
// request/answer steps without I/O: each step says which request to send
// next (path and JSON body) and reads its answer. EtcdStore drives them with
// blocking calls (rpc.h); the benchmark's event-driven load driver
// (bench/store/etcd_event_clients.h) drives thousands of them over libcurl's
// multi interface. One definition, so both send exactly the same requests.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "store/store.h"

namespace resilient::store::etcd {

// A request to the gateway: kv::k*Path and its body.
struct EtcdRequest {
  const char* path = nullptr;
  nlohmann::json body;
};

// Operation markers (exactly-once add, compareSet, remove): keys under
// kMarkerRoot + "<client id>/<n>".
extern const std::string kMarkerRoot;
std::string newClientId();  // 16 random hex digits
std::string markerKey(std::string_view clientId, uint64_t seq);
// The TTL of the lease markers are written with: they must outlive any
// retry of their operation, i.e. a call's timeout.
int64_t markerLeaseSeconds(Millis defaultTimeout);

// Barrier keys: "<name>\0b/<generation>/...", so removePrefix of any prefix
// of the name removes them too.
struct BarrierKeys {
  std::string base;
  explicit BarrierKeys(const BarrierArrival& a);
  std::string world() const { return base + "world"; }
  std::string ranks() const { return base + "r/"; }
  std::string rank(int r) const;
  std::string surplus() const { return base + "s/"; }
  // count/<i>: the i-th of an arrival's ranks puts count/<i>, so the sum of
  // their versions is the number of ranks counted (one key "count" could
  // count only one rank per transaction: etcd refuses two puts of a key in one).
  std::string counts() const { return base + "count/"; }
  std::string count(int i) const;
  std::string done() const { return base + "done"; }
};

// One arrival at a barrier of one rank or several (every rank within
// [0, worldSize): the caller sends surplus ranks apart): a transaction that,
// if `world` holds our world size and no r/<rank> of the arrival exists yet,
// puts each r/<rank> and count/0 .. count/<n-1> and reads the count/ keys and
// `done` at one revision. Each count/<i> is put once per arrival that has an
// i-th rank, so the sum of their versions is the number of ranks counted: no
// step scans the r/ keys, and etcd applies each arrival in O(n log N) for its
// n ranks. The transaction's other branch reads `world`, each r/<rank> and
// the count: the first arrival creates `world` in another transaction; ranks
// counted already (a retry, or a monitor counted one) are dropped and the
// others sent again. An arrival of more ranks than one transaction may touch
// (kMaxAtomicKeys operations) goes in several. The arrival that completes the
// count puts `done`; waiters watch `done` from watchFrom() (watch.h).
class BarrierArrivalSteps {
 public:
  explicit BarrierArrivalSteps(const BarrierArrival& a);

  EtcdRequest first() { return arriveRequest(); }
  // The answer to the last request; returns the next request, or nullopt
  // once the arrival is settled (result()). Throws InvalidArgument (another
  // world size) or BackendError (the arrival could not be recorded).
  std::optional<EtcdRequest> next(const nlohmann::json& answer);

  // Settled: counted (arrivalIndex, arrived) and completed or not.
  const BarrierResult& result() const { return result_; }
  // Where a rank that must wait for the release watches.
  std::string watchKey() const { return keys_.done(); }
  int64_t watchFrom() const { return revision_ + 1; }

 private:
  enum class Stage { kArrive, kCreate, kRelease, kSettled };
  EtcdRequest arriveRequest();
  EtcdRequest createRequest();
  std::optional<EtcdRequest> counted(int64_t count, bool done);
  std::optional<EtcdRequest> notCounted(const nlohmann::json& answer);

  BarrierArrival arrival_;
  std::vector<int> pending_;  // ranks not counted yet, in order
  std::vector<int> chunk_;    // the ones the last request counts
  BarrierKeys keys_;
  std::string world_;
  Stage stage_ = Stage::kArrive;
  int attempt_ = 0;
  int64_t revision_ = 0;
  BarrierResult result_;
};

// add(key, delta): read the counter, then a transaction that puts the sum
// if nobody changed the counter since (mod revision) and writes the
// operation marker (with the sum) in the same transaction, so a retry of an
// applied attempt finds the marker and answers the first attempt's sum.
class CounterAddSteps {
 public:
  CounterAddSteps(std::string_view key, int64_t delta, std::string marker);

  EtcdRequest read() const;  // kRangePath
  // The read's answer. Throws InvalidArgument (not a counter, overflow).
  void onRead(const nlohmann::json& rangeAnswer);
  // The transaction (kTxnPath), its marker on `lease`.
  EtcdRequest txn(int64_t lease) const;
  // The transaction's answer: the sum once applied (now or by an earlier
  // attempt), or nullopt when another add came first (the counter's new
  // value is taken from the answer: send txn() again).
  std::optional<int64_t> onTxn(const nlohmann::json& answer);

 private:
  void take(const std::optional<std::string>& value, int64_t modRevision);

  std::string key_;
  int64_t delta_;
  std::string marker_;
  int64_t mod_ = 0;
  std::string text_;  // the sum
};

}  // namespace resilient::store::etcd
