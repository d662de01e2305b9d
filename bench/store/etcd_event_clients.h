// The benchmark's event-driven simulated etcd clients: all of a worker
// process's ranks on one thread, over libcurl's multi interface (socket API
// with the event loop; one easy handle per rank, the multi handle's pool of HTTP/1.1
// keep-alive connections to the gateway). Each rank sends exactly the
// requests EtcdStore sends, built and read by the same code
// (etcd/store_protocol.h, etcd/watch.h, etcd/rpc.h answerOf, the request
// set-up of etcd/http_client.h): a barrier arrival is the arrival
// transaction(s), the `done` put by the last rank, and a watch stream on
// `done` per waiter; add is a read and a marker transaction. What it does not
// reproduce is EtcdStore's member failover (the benchmark's etcd has one
// member: a failed request is sent again to the same one) and its renewal of
// a quiet watch stream (the driver's streams wait up to 600 s).
//
// A thread per rank (etcd_clients.h) cannot simulate 16k ranks on a 2-core
// machine; this driver can.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench/store/load_driver.h"
#include "common/net/event_loop.h"

namespace resilient::store::bench {

class EtcdEventClients {
 public:
  // `sourceIp`: the loopback address this process connects from (many
  // processes do not share one address's ephemeral ports); empty: any.
  // `ranksPerClient` > 1: each client is a node agent that arrives at a
  // barrier for that many ranks at once (client i for ranks i*k .. i*k+k-1,
  // one arrival and one watch), as store/proxy/node_proxy.h does upstream.
  EtcdEventClients(const std::vector<std::string>& endpoints, int clients, int firstRank,
                   const std::string& sourceIp, int ranksPerClient = 1);
  ~EtcdEventClients();
  EtcdEventClients(const EtcdEventClients&) = delete;
  EtcdEventClients& operator=(const EtcdEventClients&) = delete;

  // As EtcdClients: every rank's arrival but the last one's when `holdLast`.
  void startBarrier(const std::string& name, uint64_t generation, int worldSize, bool holdLast,
                    BarrierTimes* times);
  void startHeld(BarrierTimes* times);
  // Until every started rank is released (or failed); fills the times.
  void awaitReleases(BarrierTimes* times);
  // Closed loop of `op` ("set", "get", "add") on every rank, none started
  // after durationMs; returns the number completed, the last ones included.
  uint64_t runOps(const std::string& op, int durationMs);

 private:
  struct Rank;
  enum class OpKind { kSet, kGet, kAdd };

  void loop();
  // A new lease for the add markers (lease_).
  void grantMarkerLease();
  // Runs `fn` on the loop thread and waits for it.
  void runInLoop(std::function<void()> fn);
  void wake();
  // Sends `body` to `path` for `rank` (a watch stream when `stream`).
  void send(Rank& rank, const char* path, const std::string& body, bool stream);
  void finished(void* easy, int code);
  void retryLater(Rank& rank, const std::string& why);
  void fail(Rank& rank, const std::string& why);
  void settle(Rank& rank);  // the rank's part of the round or op loop is over
  void startArrival(Rank& rank);
  void startWatch(Rank& rank);
  void startOp(Rank& rank);
  void onBarrierAnswer(Rank& rank, const void* answer);
  void onOpAnswer(Rank& rank, const void* answer);

  static int socketCallback(void* easy, int fd, int what, void* self, void* socketp);
  static int timerCallback(void* multi, long timeoutMs, void* self);

  std::vector<std::string> endpoints_;
  std::string interface_;  // CURLOPT_INTERFACE ("host!127.0.0.2")
  std::string clientId_;   // operation markers
  int ranksPerClient_ = 1;
  int64_t lease_ = 0;
  uint64_t markerSeq_ = 0;
  void* headers_ = nullptr;  // curl_slist*
  void* multi_ = nullptr;    // CURLM*
  EventLoop events_;         // curl's sockets; wake() runs the queued tasks
  int64_t timerDueNs_ = -1;  // curl's timer, -1: none
  std::vector<std::unique_ptr<Rank>> ranks_;
  std::vector<Rank*> retries_;
  uint64_t retryReasons_ = 0;

  // Round / op loop state (loop thread).
  std::string name_;
  uint64_t generation_ = 0;
  int worldSize_ = 0;
  OpKind op_ = OpKind::kSet;
  uint64_t opEndNs_ = 0;
  uint64_t opsDone_ = 0;
  uint64_t opErrors_ = 0;
  std::string firstError_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  size_t pending_ = 0;  // ranks still busy in the round / op loop
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace resilient::store::bench
