// Who is who in the job: every rank publishes its identity (host, pid, its
// monitor's pid) under rank/<r>/identity; the monitor thread maps the peer a
// plugin fault names (host, pid) back to an initial rank, the culprit.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "restart/protocol/job_keys.h"
#include "store/store.h"

namespace resilient::restart {

struct RankIdentity {
  std::string host;
  int64_t pid = 0;
  int64_t monitorPid = 0;  // 0: no monitor process
  // Random per Wrapper: tells two runs of one process apart (threads as ranks
  // share host and pid), so that a claim is only ever ours.
  uint64_t instance = 0;

  static RankIdentity ofThisProcess();
  // The same run of the same process (the monitor's pid aside: it is added
  // once the monitor runs).
  bool sameProcess(const RankIdentity& other) const noexcept {
    return host == other.host && pid == other.pid && instance == other.instance;
  }
  std::string describe() const;  // "pid P on host \"H\""
  std::string toJson() const;
  static RankIdentity fromJson(std::string_view json);  // throws std::invalid_argument
};

class RankRegistry {
 public:
  RankRegistry(store::Store& store, const protocol::JobKeys& keys, int worldSize);

  // Registers `identity` as initial rank r, once per job: throws ConfigError
  // when another process holds rank r under this job id already (an earlier
  // job's keys left in the store, or two processes started with the same
  // rank), since old keys would confuse this job's barriers and records.
  void claim(int initialRank, const RankIdentity& identity);
  // The same claim without the error: nullopt when rank r is ours now, else
  // the identity of the process that holds it.
  std::optional<RankIdentity> tryClaim(int initialRank, const RankIdentity& identity);
  // Who holds rank r in the store now (nullopt: nobody), read afresh.
  std::optional<RankIdentity> holderOf(int initialRank);
  // Replaces the claimed identity (adds the monitor's pid once it runs).
  void publish(int initialRank, const RankIdentity& identity);
  // The same, only over `claimed` (a joiner's claim, which a rank put back
  // after a store restart may have replaced): whether it did.
  bool replace(int initialRank, const RankIdentity& claimed, const RankIdentity& identity);
  // The slots to read from now on (the current World's: it grows as
  // processes join the job).
  void setWorldSize(int worldSize);
  // The initial rank of the process `pid` on `host`, or -1 when no rank of
  // the job has that identity (or the store cannot say: never throws). Reads
  // the registry again on a miss.
  int find(const std::string& host, int64_t pid);
  // The host of `initialRank` ("" if it never registered): the grouping key
  // of filterCountGroupedByKey().
  std::string hostOf(int initialRank);

 private:
  void reload();  // with mutex_ held

  store::Store& store_;
  const protocol::JobKeys& keys_;
  int worldSize_;
  std::mutex mutex_;
  std::map<std::pair<std::string, int64_t>, int> byProcess_;
  std::map<int, std::string> hostByRank_;
};

}  // namespace resilient::restart
