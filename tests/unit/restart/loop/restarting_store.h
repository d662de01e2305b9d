// A job's store that restarts empty, for threads as ranks: one in-process
// "server" whose instance can be replaced by a new, empty one, and a client
// per rank that follows it as the TCP client with followRestarts does
// (store/tcp/client.cc, TcpStoreClient::connection): the first call of a
// client after a restart calls its onRestart (the loop's
// LoopEnvironment::followStoreRestarts) and then goes to the new instance; a
// call blocked in a wait or a barrier when the instance goes is sent again
// to the new one. A hook runs after every call the server applies, so a test
// restarts it at an exact point of the protocol.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "store/memory_store.h"
#include "store/store.h"

namespace resilient::test {

class RestartingStoreServer {
 public:
  // After each compare-and-set the server applied: (key, result); true
  // restarts the server at once (the caller's reply still comes from the
  // instance that applied it).
  using AfterCompareSet = std::function<bool(std::string_view key, const store::CasResult&)>;
  // After each set the server applied, the same.
  using AfterSet = std::function<bool(std::string_view key, std::string_view value)>;

  RestartingStoreServer() : instance_(std::make_shared<store::MemoryStore>()) {}

  void restart();
  uint64_t restarts() const;
  void setAfterCompareSet(AfterCompareSet hook);
  void setAfterSet(AfterSet hook);

  // A client of its own for one rank.
  std::shared_ptr<store::Store> client();

 private:
  friend class RestartingStoreClient;
  // The current instance and how many restarts preceded it.
  std::pair<std::shared_ptr<store::MemoryStore>, uint64_t> current() const;
  bool afterCompareSet(std::string_view key, const store::CasResult& result);
  bool afterSet(std::string_view key, std::string_view value);

  mutable std::mutex mutex_;
  std::shared_ptr<store::MemoryStore> instance_;
  uint64_t restarts_ = 0;
  AfterCompareSet afterCompareSet_;
  AfterSet afterSet_;
};

class RestartingStoreClient final : public store::Store {
 public:
  explicit RestartingStoreClient(RestartingStoreServer& server) : server_(server) {}

  // What the client calls from inside the first call to a new instance.
  void followRestarts(std::function<void()> onRestart);
  // Runs before each call that names keys, with its first key (a test
  // delays one rank's reads).
  void beforeCall(std::function<void(std::string_view key)> hook);
  // For the barrier arrivals it returns true for: a release that reaches
  // this client is taken as lost with the instance that sent it (the
  // connection died before the reply came): the client waits for the
  // server's next restart and sends the arrival again to the new instance,
  // as the TCP client does.
  void loseBarrierRelease(std::function<bool(const store::BarrierArrival&)> hook);

  void set(std::string_view k, std::string_view v, store::Timeout t) override;
  void setExpiring(std::string_view k, std::string_view v, store::Millis ttl,
                   store::Timeout t) override;
  void setExpiringMany(const std::vector<store::KeyValue>& pairs, store::Millis ttl,
                       store::Timeout t) override;
  std::optional<std::string> get(std::string_view k, store::Timeout t) override;
  int64_t add(std::string_view k, int64_t d, store::Timeout t) override;
  store::CasResult compareSet(std::string_view k, std::optional<std::string_view> e,
                              std::string_view d, store::Timeout t) override;
  std::vector<std::optional<std::string>> multiGet(const std::vector<std::string>& k,
                                                   store::Timeout t) override;
  void multiSet(const std::vector<store::KeyValue>& p, store::Timeout t) override;
  bool remove(std::string_view k, store::Timeout t) override;
  uint64_t removePrefix(std::string_view p, store::Timeout t) override;
  bool check(const std::vector<std::string>& k, store::Timeout t) override;
  void wait(const std::vector<std::string>& k, store::Timeout t) override;
  store::BarrierResult barrier(const store::BarrierArrival& a, store::Timeout t) override;
  std::string describe() const override { return "memory (restarting)"; }

 private:
  // Runs `call` on the current instance, again on the next one when the
  // instance it reached was closed by a restart (a closed instance applies
  // nothing, so every call may be sent again).
  template <typename Call>
  auto onInstance(std::string_view key, store::Timeout timeout, Call&& call);
  static constexpr store::Millis kDefaultTimeout{300000};  // MemoryStore's

  RestartingStoreServer& server_;
  std::mutex mutex_;
  uint64_t seen_ = 0;
  std::function<void()> onRestart_;
  std::function<void(std::string_view)> beforeCall_;
  std::function<bool(const store::BarrierArrival&)> loseRelease_;
};

}  // namespace resilient::test
