// A real etcd cluster on loopback for the tests: N members, ports chosen
// free, data in tmpfs, killed and removed at the end. Needs the etcd binary
// (RESILIENT_ETCD_BIN, else `etcd` on PATH; Debian: apt-get install
// etcd-server).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tests/unit/store/store_test_util.h"

namespace resilient::test {

// The etcd binary, or "" when there is none.
std::string etcdBinary();

class EtcdCluster {
 public:
  // Starts `members` members and waits until each reports healthy.
  explicit EtcdCluster(int members);
  ~EtcdCluster();
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  std::vector<std::string> endpoints() const;  // "127.0.0.1:port" of every member
  std::string url() const;                     // "etcd://a,b,c"
  int size() const { return static_cast<int>(members_.size()); }
  // SIGKILL: the member is gone (its endpoint stays in endpoints()).
  void kill(int member);
  // The member that currently leads, or -1.
  int leader() const;

 private:
  struct Member {
    std::string name;
    uint16_t clientPort = 0;
    uint16_t peerPort = 0;
    std::string dataDir;  // its log is dataDir + ".log"
    std::unique_ptr<ChildProcess> process;
  };
  // Starts every member on fresh ports; "" once all are healthy, else why not.
  std::string start(const std::string& bin, int members, int attempt);
  void stop();
  // "" once the member serves a linearizable read; why not when it exited or
  // did not within 30 s.
  std::string waitHealthy(int member);

  std::string dir_;
  std::vector<Member> members_;
};

}  // namespace resilient::test
