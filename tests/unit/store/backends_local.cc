// test-store's backends: the in-memory store and the TCP store (one server
// per test binary on 127.0.0.1, a port chosen by the kernel).
#include <memory>
#include <mutex>

#include "store/memory_store.h"
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

const BackendRegistration kTcp{
    Backend{"tcp", [] {
              static std::once_flag once;
              static std::unique_ptr<store::tcp::StoreServer> server;
              std::call_once(once, [] {
                store::tcp::ServerOptions o;
                o.host = "127.0.0.1";
                o.token = "conformance-token";
                server = std::make_unique<store::tcp::StoreServer>(o);
              });
              store::ClientOptions c = testClientOptions();
              c.token = "conformance-token";
              return std::static_pointer_cast<store::Store>(
                  std::make_shared<store::tcp::TcpStoreClient>("127.0.0.1", server->port(), c));
            }}};

}  // namespace
}  // namespace resilient::test
