#include "tests/unit/restart/loop/restarting_store.h"

#include <chrono>
#include <thread>
#include <utility>

#include "store/errors.h"

namespace resilient::test {

namespace {

std::string_view firstKey(const std::vector<std::string>& keys) {
  return keys.empty() ? std::string_view() : std::string_view(keys.front());
}
std::string_view firstKey(const std::vector<store::KeyValue>& pairs) {
  return pairs.empty() ? std::string_view() : std::string_view(pairs.front().first);
}

}  // namespace

void RestartingStoreServer::restart() {
  std::shared_ptr<store::MemoryStore> old;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    old = std::exchange(instance_, std::make_shared<store::MemoryStore>());
    ++restarts_;
  }
  old->close();  // its blocked calls end; the clients send them again
}

uint64_t RestartingStoreServer::restarts() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return restarts_;
}

void RestartingStoreServer::setAfterCompareSet(AfterCompareSet hook) {
  std::lock_guard<std::mutex> lock(mutex_);
  afterCompareSet_ = std::move(hook);
}

void RestartingStoreServer::setAfterSet(AfterSet hook) {
  std::lock_guard<std::mutex> lock(mutex_);
  afterSet_ = std::move(hook);
}

bool RestartingStoreServer::afterSet(std::string_view key, std::string_view value) {
  AfterSet hook;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    hook = afterSet_;
  }
  return hook && hook(key, value);
}

std::shared_ptr<store::Store> RestartingStoreServer::client() {
  return std::make_shared<RestartingStoreClient>(*this);
}

std::pair<std::shared_ptr<store::MemoryStore>, uint64_t> RestartingStoreServer::current() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {instance_, restarts_};
}

bool RestartingStoreServer::afterCompareSet(std::string_view key, const store::CasResult& result) {
  AfterCompareSet hook;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    hook = afterCompareSet_;
  }
  return hook && hook(key, result);
}

void RestartingStoreClient::followRestarts(std::function<void()> onRestart) {
  std::lock_guard<std::mutex> lock(mutex_);
  onRestart_ = std::move(onRestart);
}

void RestartingStoreClient::beforeCall(std::function<void(std::string_view)> hook) {
  std::lock_guard<std::mutex> lock(mutex_);
  beforeCall_ = std::move(hook);
}

void RestartingStoreClient::loseBarrierRelease(
    std::function<bool(const store::BarrierArrival&)> hook) {
  std::lock_guard<std::mutex> lock(mutex_);
  loseRelease_ = std::move(hook);
}

template <typename Call>
auto RestartingStoreClient::onInstance(std::string_view key, store::Timeout timeout, Call&& call) {
  std::function<void(std::string_view)> before;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    before = beforeCall_;
  }
  if (before && !key.empty()) {
    before(key);
  }
  // A call sent again has what is left of its time.
  const auto deadline = std::chrono::steady_clock::now() + timeout.orDefault(kDefaultTimeout);
  for (;;) {
    auto [instance, restarts] = server_.current();
    std::function<void()> onRestart;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (restarts != seen_) {
        seen_ = restarts;
        onRestart = onRestart_;
      }
    }
    if (onRestart) {
      onRestart();
    }
    try {
      return call(*instance, store::Timeout(std::chrono::ceil<store::Millis>(
                                 deadline - std::chrono::steady_clock::now())));
    } catch (const store::StoreClosed&) {
      // Restarted meanwhile: the next instance.
    }
  }
}

void RestartingStoreClient::set(std::string_view k, std::string_view v, store::Timeout t) {
  onInstance(k, t, [&](store::Store& s, store::Timeout left) { s.set(k, v, left); });
  if (server_.afterSet(k, v)) {
    server_.restart();
  }
}
void RestartingStoreClient::setExpiring(std::string_view k, std::string_view v, store::Millis ttl,
                                        store::Timeout t) {
  onInstance(k, t, [&](store::Store& s, store::Timeout left) { s.setExpiring(k, v, ttl, left); });
}
void RestartingStoreClient::setExpiringMany(const std::vector<store::KeyValue>& pairs,
                                            store::Millis ttl, store::Timeout t) {
  onInstance(firstKey(pairs), t,
             [&](store::Store& s, store::Timeout left) { s.setExpiringMany(pairs, ttl, left); });
}
std::optional<std::string> RestartingStoreClient::get(std::string_view k, store::Timeout t) {
  return onInstance(k, t, [&](store::Store& s, store::Timeout left) { return s.get(k, left); });
}
int64_t RestartingStoreClient::add(std::string_view k, int64_t d, store::Timeout t) {
  return onInstance(k, t, [&](store::Store& s, store::Timeout left) { return s.add(k, d, left); });
}
store::CasResult RestartingStoreClient::compareSet(std::string_view k,
                                                   std::optional<std::string_view> e,
                                                   std::string_view d, store::Timeout t) {
  const store::CasResult result = onInstance(
      k, t, [&](store::Store& s, store::Timeout left) { return s.compareSet(k, e, d, left); });
  if (server_.afterCompareSet(k, result)) {
    server_.restart();
  }
  return result;
}
std::vector<std::optional<std::string>> RestartingStoreClient::multiGet(
    const std::vector<std::string>& k, store::Timeout t) {
  return onInstance(firstKey(k), t,
                    [&](store::Store& s, store::Timeout left) { return s.multiGet(k, left); });
}
void RestartingStoreClient::multiSet(const std::vector<store::KeyValue>& p, store::Timeout t) {
  onInstance(firstKey(p), t, [&](store::Store& s, store::Timeout left) { s.multiSet(p, left); });
}
bool RestartingStoreClient::remove(std::string_view k, store::Timeout t) {
  return onInstance(k, t, [&](store::Store& s, store::Timeout left) { return s.remove(k, left); });
}
uint64_t RestartingStoreClient::removePrefix(std::string_view p, store::Timeout t) {
  return onInstance(p, t,
                    [&](store::Store& s, store::Timeout left) { return s.removePrefix(p, left); });
}
bool RestartingStoreClient::check(const std::vector<std::string>& k, store::Timeout t) {
  return onInstance(firstKey(k), t,
                    [&](store::Store& s, store::Timeout left) { return s.check(k, left); });
}
void RestartingStoreClient::wait(const std::vector<std::string>& k, store::Timeout t) {
  onInstance(firstKey(k), t, [&](store::Store& s, store::Timeout left) { s.wait(k, left); });
}
store::BarrierResult RestartingStoreClient::barrier(const store::BarrierArrival& a,
                                                    store::Timeout t) {
  const uint64_t before = server_.restarts();
  const store::BarrierResult result = onInstance(
      a.name, t, [&](store::Store& s, store::Timeout left) { return s.barrier(a, left); });
  std::function<bool(const store::BarrierArrival&)> lose;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    lose = loseRelease_;
  }
  if (!result.completed || !a.waitForRelease || !lose || !lose(a)) {
    return result;
  }
  while (server_.restarts() == before) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // the restart is another thread's
  }
  return onInstance(a.name, t,
                    [&](store::Store& s, store::Timeout left) { return s.barrier(a, left); });
}

}  // namespace resilient::test
