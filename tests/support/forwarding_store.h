// A store that passes every call on to another: a test's store derives from
// it and overrides only the calls it counts, slows or fails; onCall() runs
// before every call (a test throws there to make the store unreachable).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "store/store.h"

namespace resilient::test {

class ForwardingStore : public store::Store {
 public:
  explicit ForwardingStore(std::shared_ptr<store::Store> inner) : inner_(std::move(inner)) {}

  void set(std::string_view k, std::string_view v, store::Timeout t) override {
    onCall();
    inner_->set(k, v, t);
  }
  void setExpiring(std::string_view k, std::string_view v, store::Millis ttl,
                   store::Timeout t) override {
    onCall();
    inner_->setExpiring(k, v, ttl, t);
  }
  void setExpiringMany(const std::vector<store::KeyValue>& pairs, store::Millis ttl,
                       store::Timeout t) override {
    onCall();
    inner_->setExpiringMany(pairs, ttl, t);
  }
  std::optional<std::string> get(std::string_view k, store::Timeout t) override {
    onCall();
    return inner_->get(k, t);
  }
  int64_t add(std::string_view k, int64_t d, store::Timeout t) override {
    onCall();
    return inner_->add(k, d, t);
  }
  store::CasResult compareSet(std::string_view k, std::optional<std::string_view> e,
                              std::string_view d, store::Timeout t) override {
    onCall();
    return inner_->compareSet(k, e, d, t);
  }
  std::vector<std::optional<std::string>> multiGet(const std::vector<std::string>& k,
                                                   store::Timeout t) override {
    onCall();
    return inner_->multiGet(k, t);
  }
  void multiSet(const std::vector<store::KeyValue>& p, store::Timeout t) override {
    onCall();
    inner_->multiSet(p, t);
  }
  bool remove(std::string_view k, store::Timeout t) override {
    onCall();
    return inner_->remove(k, t);
  }
  uint64_t removePrefix(std::string_view p, store::Timeout t) override {
    onCall();
    return inner_->removePrefix(p, t);
  }
  bool check(const std::vector<std::string>& k, store::Timeout t) override {
    onCall();
    return inner_->check(k, t);
  }
  void wait(const std::vector<std::string>& k, store::Timeout t) override {
    onCall();
    inner_->wait(k, t);
  }
  store::BarrierResult barrier(const store::BarrierArrival& a, store::Timeout t) override {
    onCall();
    return inner_->barrier(a, t);
  }
  std::string describe() const override { return "forwarding to " + inner_->describe(); }

  store::Store& inner() const { return *inner_; }

 protected:
  virtual void onCall() {}

 private:
  std::shared_ptr<store::Store> inner_;
};

}  // namespace resilient::test
