// test-store's backends: the in-memory store, the TCP store (one server per
// test binary on 127.0.0.1, a port chosen by the kernel), the TCP store
// through LazyStore, and the TCP store through a node agent's proxy.
#include <memory>
#include <mutex>
#include <string>

#include "store/lazy_store.h"
#include "store/memory_store.h"
#include "store/proxy/node_proxy.h"
#include "store/tcp/client.h"
#include "store/tcp/server.h"
#include "tests/unit/store/backends.h"
#include "tests/unit/store/store_test_util.h"

namespace resilient::test {
namespace {

const BackendRegistration kMemory{Backend{"memory", [] {
                                            static auto shared =
                                                std::make_shared<store::MemoryStore>();
                                            return std::static_pointer_cast<store::Store>(shared);
                                          }}};

// The test binary's TCP store server, started by the first backend that needs it.
uint16_t tcpServerPort() {
  static std::once_flag once;
  static std::unique_ptr<store::tcp::StoreServer> server;
  std::call_once(once, [] {
    store::tcp::ServerOptions o;
    o.host = "127.0.0.1";
    o.token = "conformance-token";
    server = std::make_unique<store::tcp::StoreServer>(o);
  });
  return server->port();
}

store::ClientOptions tcpClientOptions() {
  store::ClientOptions c = testClientOptions();
  c.token = "conformance-token";
  return c;
}

const BackendRegistration kTcp{Backend{"tcp", [] {
                                         return std::static_pointer_cast<store::Store>(
                                             std::make_shared<store::tcp::TcpStoreClient>(
                                                 "127.0.0.1", tcpServerPort(), tcpClientOptions()));
                                       }}};

// Every call through LazyStore (the monitor's store): opened by the first.
const BackendRegistration kLazyTcp{
    Backend{"lazy-tcp", [] {
              return std::static_pointer_cast<store::Store>(std::make_shared<store::LazyStore>(
                  "tcp://127.0.0.1:" + std::to_string(tcpServerPort()), tcpClientOptions()));
            }}};

// Every call through a node agent's proxy (tools/run/): the local clients
// speak the TCP protocol to it, it forwards through one client of the TCP
// store, aggregating barrier arrivals and expiring writes.
uint16_t nodeProxyPort() {
  static std::once_flag once;
  static std::unique_ptr<store::proxy::NodeProxy> proxy;
  std::call_once(once, [] {
    store::proxy::NodeProxyOptions o;
    o.token = "node-token";
    o.expiringLinger = store::Millis(20);
    proxy = std::make_unique<store::proxy::NodeProxy>(
        std::make_shared<store::tcp::TcpStoreClient>("127.0.0.1", tcpServerPort(),
                                                     tcpClientOptions()),
        o);
  });
  return proxy->port();
}

const BackendRegistration kNodeProxy{Backend{"node-proxy", [] {
                                               store::ClientOptions c = testClientOptions();
                                               c.token = "node-token";
                                               return std::static_pointer_cast<store::Store>(
                                                   std::make_shared<store::tcp::TcpStoreClient>(
                                                       "127.0.0.1", nodeProxyPort(), c));
                                             }}};

}  // namespace
}  // namespace resilient::test
