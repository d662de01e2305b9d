// The benchmark's simulated clients for the etcd backend: one thread per
// simulated rank (small stacks), all calling one EtcdStore, so what is
// measured is the real client (a transaction per arrival, a watch per
// waiter, one HTTP connection per blocked call).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "bench/store/load_driver.h"
#include "store/etcd/etcd_store.h"

namespace resilient::store::bench {

class EtcdClients {
 public:
  EtcdClients(const std::vector<std::string>& endpoints, int clients, int firstRank);
  ~EtcdClients();
  EtcdClients(const EtcdClients&) = delete;
  EtcdClients& operator=(const EtcdClients&) = delete;

  // Starts every rank's barrier call but the last one's when `holdLast`.
  void startBarrier(const std::string& name, uint64_t generation, int worldSize, bool holdLast,
                    BarrierTimes* times);
  void startHeld(BarrierTimes* times);
  // Joins the calls; fills release times, counts and errors.
  void awaitReleases(BarrierTimes* times);
  // Closed loop of `op` ("set", "get", "add") on every client, starting none
  // after durationMs; returns the number completed, the last ones included.
  uint64_t runOps(const std::string& op, int durationMs);

 private:
  struct Call;
  void launch(Call* call);

  std::unique_ptr<etcd::EtcdStore> store_;
  int clients_;
  int firstRank_;
  std::string name_;
  uint64_t generation_ = 0;
  int worldSize_ = 0;
  std::vector<std::unique_ptr<Call>> calls_;
};

}  // namespace resilient::store::bench
