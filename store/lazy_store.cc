#include "store/lazy_store.h"

#include <algorithm>
#include <utility>

#include "store/open_store.h"

namespace resilient::store {

LazyStore::LazyStore(std::string url, ClientOptions options)
    : url_(std::move(url)), options_(std::move(options)) {}

std::shared_ptr<Store> LazyStore::opened(Timeout timeout) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!store_) {
    ClientOptions o = options_;
    o.connectTimeout = std::min(o.connectTimeout, timeout.orDefault(o.defaultTimeout));
    store_ = openStore(url_, o);
  }
  return store_;
}

void LazyStore::set(std::string_view key, std::string_view value, Timeout timeout) {
  opened(timeout)->set(key, value, timeout);
}

void LazyStore::setExpiring(std::string_view key, std::string_view value, Millis ttl,
                            Timeout timeout) {
  opened(timeout)->setExpiring(key, value, ttl, timeout);
}

std::optional<std::string> LazyStore::get(std::string_view key, Timeout timeout) {
  return opened(timeout)->get(key, timeout);
}

int64_t LazyStore::add(std::string_view key, int64_t delta, Timeout timeout) {
  return opened(timeout)->add(key, delta, timeout);
}

CasResult LazyStore::compareSet(std::string_view key, std::optional<std::string_view> expected,
                                std::string_view desired, Timeout timeout) {
  return opened(timeout)->compareSet(key, expected, desired, timeout);
}

std::vector<std::optional<std::string>> LazyStore::multiGet(const std::vector<std::string>& keys,
                                                            Timeout timeout) {
  return opened(timeout)->multiGet(keys, timeout);
}

void LazyStore::multiSet(const std::vector<KeyValue>& pairs, Timeout timeout) {
  opened(timeout)->multiSet(pairs, timeout);
}

bool LazyStore::remove(std::string_view key, Timeout timeout) {
  return opened(timeout)->remove(key, timeout);
}

uint64_t LazyStore::removePrefix(std::string_view prefix, Timeout timeout) {
  return opened(timeout)->removePrefix(prefix, timeout);
}

bool LazyStore::check(const std::vector<std::string>& keys, Timeout timeout) {
  return opened(timeout)->check(keys, timeout);
}

void LazyStore::wait(const std::vector<std::string>& keys, Timeout timeout) {
  opened(timeout)->wait(keys, timeout);
}

void LazyStore::setExpiringMany(const std::vector<KeyValue>& pairs, Millis ttl,
                                Timeout timeout) {
  opened(timeout)->setExpiringMany(pairs, ttl, timeout);
}

BarrierResult LazyStore::barrier(const BarrierArrival& arrival, Timeout timeout) {
  return opened(timeout)->barrier(arrival, timeout);
}

std::string LazyStore::describe() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return store_ ? store_->describe() : url_;
}

}  // namespace resilient::store
