// TcpStoreClient: the Store interface over a connection to a StoreServer.
//
// Connecting retries with exponential backoff and jitter until
// connectTimeout (the server may start after its clients). Requests carry ids
// and may be in flight from several threads at once; one reader thread per
// connection hands each reply to its caller, so a thread blocked in wait() or
// barrier() holds up no one. Waits and barriers are timed by the server,
// which answers with what is missing; the client adds a grace period to its
// own deadline for a server that does not answer at all.
//
// A broken connection fails the calls in flight with ConnectionLost, except
// the idempotent ones (get, set, check, wait, barrier, ...), which are sent
// again once the client has reconnected — to the same server instance only:
// a restarted server has lost the store's state, so the client reports that
// instead of carrying on (unless it follows restarts, ClientOptions::
// followRestarts: then every call in flight, idempotent or not, goes to the
// new instance). A server that refuses connections is gone; the client says
// so at once rather than retrying until the deadline.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "store/client_options.h"
#include "store/store.h"
#include "store/tcp/protocol.h"

namespace resilient::store::tcp {

class TcpStoreClient final : public Store {
 public:
  // Connects (with retries) and completes the handshake. Throws
  // ConnectionLost (unreachable within connectTimeout), AuthRefused or
  // ProtocolError.
  TcpStoreClient(std::string host, uint16_t port, ClientOptions options);
  ~TcpStoreClient() override;

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
  std::string describe() const override;

  // A round trip to the server (health check).
  void ping(Timeout timeout = {});
  // The server instance this client is bound to.
  uint64_t serverInstance() const;
  // Fails every call in flight with StoreClosed-like errors and disconnects.
  void close();

 private:
  class ServerConnection;
  struct Attempt;

  // How call() may treat a request.
  struct CallMode {
    bool idempotent = false;   // may be sent again after the connection broke
    bool serverTimed = false;  // the server waits (up to the request's timeout) before replying
  };
  // The first connection, or a reconnection to the same server instance.
  enum class Connecting { kInitial, kReconnect };

  Response call(StoreRequest& req, Timeout timeout, CallMode mode);
  std::shared_ptr<ServerConnection> connection(TimePoint deadline);
  Attempt connectOnce(TimePoint deadline);
  std::shared_ptr<ServerConnection> connectWithRetries(TimePoint deadline, Connecting connecting);

  const std::string host_;
  const uint16_t port_;
  const ClientOptions options_;
  const std::string target_;  // "host:port" for messages
  std::atomic<uint64_t> nextId_{1};
  mutable std::mutex connectMu_;  // guards conn_, closed_, instance_
  std::shared_ptr<ServerConnection> conn_;
  bool closed_ = false;
  uint64_t instance_ = 0;
};

}  // namespace resilient::store::tcp
