// test-store-etcd's backends: real etcd clusters of 1 and 3 members on
// loopback, started on first use and stopped when the binary exits. The
// binary exits 77 (skipped) when etcd is not installed.
#include <memory>
#include <mutex>

#include "store/etcd/etcd_store.h"
#include "tests/support/skip.h"
#include "tests/unit/store/backends.h"
#include "tests/unit/store/etcd_cluster.h"

namespace resilient::test {
namespace {

const Precondition kNeedsEtcd{[] {
  return etcdBinary().empty() ? std::string("etcd is not installed (apt-get install etcd-server)")
                              : std::string();
}};

std::shared_ptr<store::Store> connect(int members) {
  static std::mutex mu;
  static std::unique_ptr<EtcdCluster> clusters[4];
  std::lock_guard<std::mutex> lock(mu);
  auto& c = clusters[members];
  if (!c) {
    c = std::make_unique<EtcdCluster>(members);
  }
  return std::make_shared<store::etcd::EtcdStore>(c->endpoints(), testClientOptions());
}

const BackendRegistration kEtcd1{Backend{"etcd-1", [] { return connect(1); }}};
const BackendRegistration kEtcd3{Backend{"etcd-3", [] { return connect(3); }}};

}  // namespace
}  // namespace resilient::test
