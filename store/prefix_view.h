// PrefixView: a store narrowed to the keys under a prefix. Every key and
// barrier name is prefixed on the way in; removePrefix("") clears exactly the
// view. Views nest (a view of a view joins the prefixes). The restart loop
// uses one view per iteration ("iter/7/") so each iteration's keys are
// distinct and can be removed in one call.
#pragma once

#include <memory>
#include <string>

#include "store/store.h"

namespace resilient::store {

class PrefixView final : public Store {
 public:
  PrefixView(std::shared_ptr<Store> base, std::string prefix);

  const std::string& prefix() const noexcept { return prefix_; }
  const std::shared_ptr<Store>& base() const noexcept { return base_; }

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

 private:
  std::string full(std::string_view key) const;
  std::vector<std::string> full(const std::vector<std::string>& keys) const;
  std::string strip(std::string_view key) const;

  std::shared_ptr<Store> base_;
  std::string prefix_;
};

}  // namespace resilient::store
