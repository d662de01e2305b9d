// LazyStore: a store opened at its first call instead of at construction,
// for a process that must work before the store answers. The monitor
// process is one: it watches its rank from its first moment, and a store
// that is frozen or unreachable while it starts must cost it only the store
// calls, never the watch (a TcpStoreClient connects in its constructor, for
// up to STORE_CONNECT_TIMEOUT_MS). Each call opens the store first when it
// is not open yet, that open bounded by the call's own timeout; an open that
// fails throws its StoreError and is tried again by the next call (a call
// that opens may so take its timeout twice: the open, then the call).
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "store/client_options.h"
#include "store/store.h"

namespace resilient::store {

class LazyStore final : public Store {
 public:
  // `url` as openStore() takes it; nothing is opened here.
  LazyStore(std::string url, ClientOptions options);

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
  // The opened store's description, or the URL before it is open.
  std::string describe() const override;

 private:
  // The store, opened within `timeout` if it is not open yet.
  std::shared_ptr<Store> opened(Timeout timeout);

  const std::string url_;
  const ClientOptions options_;
  mutable std::mutex mutex_;
  std::shared_ptr<Store> store_;  // set once, never reset
};

}  // namespace resilient::store
