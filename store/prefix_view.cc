#include "store/prefix_view.h"

#include <utility>

#include "store/errors.h"

namespace resilient::store {

PrefixView::PrefixView(std::shared_ptr<Store> base, std::string prefix)
    : base_(std::move(base)), prefix_(std::move(prefix)) {
  if (!base_) {
    throw InvalidArgument("PrefixView over no store");
  }
  // Flatten nested views: one hop to the real store.
  if (auto* inner = dynamic_cast<PrefixView*>(base_.get())) {
    prefix_ = inner->prefix_ + prefix_;
    base_ = inner->base_;
  }
}

std::string PrefixView::full(std::string_view key) const {
  if (key.empty()) {
    throw InvalidArgument("empty key");
  }
  std::string out;
  out.reserve(prefix_.size() + key.size());
  out.append(prefix_).append(key);
  return out;
}

std::vector<std::string> PrefixView::full(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& k : keys) {
    out.push_back(full(k));
  }
  return out;
}

std::string PrefixView::strip(std::string_view key) const {
  if (key.substr(0, prefix_.size()) == prefix_) {
    key.remove_prefix(prefix_.size());
  }
  return std::string(key);
}

void PrefixView::set(std::string_view key, std::string_view value, Timeout timeout) {
  base_->set(full(key), value, timeout);
}

void PrefixView::setExpiring(std::string_view key, std::string_view value, Millis ttl,
                             Timeout timeout) {
  base_->setExpiring(full(key), value, ttl, timeout);
}

std::optional<std::string> PrefixView::get(std::string_view key, Timeout timeout) {
  return base_->get(full(key), timeout);
}

int64_t PrefixView::add(std::string_view key, int64_t delta, Timeout timeout) {
  return base_->add(full(key), delta, timeout);
}

CasResult PrefixView::compareSet(std::string_view key, std::optional<std::string_view> expected,
                                 std::string_view desired, Timeout timeout) {
  return base_->compareSet(full(key), expected, desired, timeout);
}

std::vector<std::optional<std::string>> PrefixView::multiGet(const std::vector<std::string>& keys,
                                                             Timeout timeout) {
  return base_->multiGet(full(keys), timeout);
}

void PrefixView::multiSet(const std::vector<KeyValue>& pairs, Timeout timeout) {
  std::vector<KeyValue> prefixed;
  prefixed.reserve(pairs.size());
  for (const auto& [k, v] : pairs) {
    prefixed.emplace_back(full(k), v);
  }
  base_->multiSet(prefixed, timeout);
}

bool PrefixView::remove(std::string_view key, Timeout timeout) {
  return base_->remove(full(key), timeout);
}

uint64_t PrefixView::removePrefix(std::string_view prefix, Timeout timeout) {
  return base_->removePrefix(prefix_ + std::string(prefix), timeout);
}

bool PrefixView::check(const std::vector<std::string>& keys, Timeout timeout) {
  return base_->check(full(keys), timeout);
}

void PrefixView::wait(const std::vector<std::string>& keys, Timeout timeout) {
  try {
    base_->wait(full(keys), timeout);
  } catch (const TimeoutError& e) {
    if (e.code() != StoreErrc::kTimeout) {
      throw;
    }
    // Name the missing keys as the caller knows them.
    std::vector<std::string> missing;
    for (const auto& k : e.missingKeys()) {
      missing.push_back(strip(k));
    }
    throw TimeoutError(e.what(), std::move(missing));
  }
}

void PrefixView::setExpiringMany(const std::vector<KeyValue>& pairs, Millis ttl,
                                 Timeout timeout) {
  std::vector<KeyValue> full;
  full.reserve(pairs.size());
  for (const auto& [k, v] : pairs) {
    full.emplace_back(this->full(k), v);
  }
  base_->setExpiringMany(full, ttl, timeout);
}

BarrierResult PrefixView::barrier(const BarrierArrival& arrival, Timeout timeout) {
  BarrierArrival prefixed = arrival;
  prefixed.name = full(arrival.name);
  return base_->barrier(prefixed, timeout);
}

std::string PrefixView::describe() const {
  return base_->describe() + " (prefix '" + prefix_ + "')";
}

}  // namespace resilient::store
