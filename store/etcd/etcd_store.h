// EtcdStore: the Store interface over an etcd v3 cluster, through etcd's
// JSON gateway (HTTP/1.1 + JSON over libcurl; docs/store.md says why not
// gRPC). Every member is an endpoint; calls fail over between them (rpc.h),
// so losing a minority of the cluster does not interrupt the job.
//
// Mapping: keys and values are etcd keys and values; setExpiring attaches a
// lease; wait() is a read then a watch from the read's revision; add,
// compareSet and remove are transactions that also write an operation marker
// (a key under "\0resilient/op/", on a short lease), so a request retried on
// another member after an ambiguous failure is applied exactly once and
// answers what the first attempt did. Barriers are keys under
// "<name>\0b/<generation>/": the world size, one key per counted rank, and
// a "done" key that waiters watch.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "store/client_options.h"
#include "store/etcd/rpc.h"
#include "store/store.h"

namespace resilient::store::etcd {

class EtcdStore final : public Store {
 public:
  // `endpoints`: "host:port" (or "http://host:port") of the cluster's
  // members. Checks that one answers within connectTimeout (ConnectionLost).
  EtcdStore(std::vector<std::string> endpoints, ClientOptions options);

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
  std::string describe() const override { return rpc_.describe(); }

 private:
  TimePoint deadlineOf(Timeout t) const;
  // For the requests of a wait or barrier: the caller's deadline bounds the
  // waiting; the request itself gets at least one member timeout.
  TimePoint graceDeadline(TimePoint deadline) const;
  nlohmann::json call(std::string_view path, const nlohmann::json& body, TimePoint deadline);
  // A fresh operation marker key, and the lease markers are written with.
  std::string newMarker();
  int64_t markerLease(TimePoint deadline, bool renew = false);
  // Runs a marker-carrying transaction, granting a new marker lease if etcd
  // forgot the old one.
  nlohmann::json markedTxn(const std::function<nlohmann::json(int64_t lease)>& build,
                           TimePoint deadline);
  // Which of `keys` exist (one consistent read per kMaxAtomicKeys).
  std::vector<bool> existing(const std::vector<std::string>& keys, TimePoint deadline,
                             int64_t* revision);
  BarrierReport barrierReport(const BarrierArrival& a, TimePoint deadline);
  // Expiring keys' leases (setExpiring, setExpiringMany): a lease for `keys`
  // keys, remembered with that count; movedOff() counts the keys seen moving
  // off leases (a later put's previous lease) and revokes those of ours
  // left empty; forgetExpiring() drops one etcd no longer has.
  int64_t grantExpiring(Millis ttl, size_t keys, TimePoint deadline);
  void movedOff(const std::vector<int64_t>& previous, TimePoint deadline);
  void forgetExpiring(int64_t lease);

  Rpc rpc_;
  std::string clientId_;
  std::atomic<uint64_t> opSeq_{0};
  std::mutex leaseMu_;
  int64_t lease_ = 0;
  TimePoint leaseRenewAt_{};
  struct ExpiringLease {
    size_t keys = 0;    // keys put on it not yet seen moving to another lease
    TimePoint expires;  // after this, etcd has forgotten it
  };
  std::mutex expiringMu_;
  std::unordered_map<int64_t, ExpiringLease> expiringLeases_;
};

}  // namespace resilient::store::etcd
