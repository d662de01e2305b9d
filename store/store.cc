#include "store/store.h"

#include <algorithm>
#include <charconv>
#include <chrono>

#include "store/errors.h"

namespace resilient::store {

namespace {
thread_local std::optional<TimePoint> tDeadline;
}  // namespace

DeadlineScope::DeadlineScope(TimePoint deadline) : previous_(tDeadline) {
  tDeadline = previous_ ? std::min(*previous_, deadline) : deadline;
}

DeadlineScope::~DeadlineScope() {
  tDeadline = previous_;
}

std::optional<TimePoint> DeadlineScope::current() noexcept {
  return tDeadline;
}

Millis Timeout::orDefault(Millis fallback) const {
  const Millis own = isDefault() ? fallback : ms_;
  if (!tDeadline) {
    return own;
  }
  const auto left = std::chrono::ceil<Millis>(*tDeadline - SteadyClock::now());
  return std::min(own, std::max(Millis(1), left));
}

bool Store::exists(std::string_view key, Timeout timeout) {
  return check({std::string(key)}, timeout);
}

std::string Store::waitGet(std::string_view key, Timeout timeout) {
  // The second call gets what remains of the deadline, at least 1 ms.
  const auto start = std::chrono::steady_clock::now();
  wait({std::string(key)}, timeout);
  Timeout rest = timeout;
  if (!timeout.isDefault()) {
    const auto spent = std::chrono::duration_cast<Millis>(std::chrono::steady_clock::now() - start);
    rest = Timeout(std::max(Millis(1), timeout.orDefault(Millis(0)) - spent));
  }
  std::optional<std::string> value = get(key, rest);
  if (!value) {
    // Set, then removed between the two calls.
    throw TimeoutError("key '" + std::string(key) + "' was removed right after it appeared",
                       {std::string(key)});
  }
  return std::move(*value);
}

void checkKey(std::string_view key) {
  if (key.empty()) {
    throw InvalidArgument("empty key");
  }
  if (key.size() > kMaxKeyBytes) {
    throw InvalidArgument("key of " + std::to_string(key.size()) + " bytes exceeds the limit of " +
                          std::to_string(kMaxKeyBytes) + " bytes");
  }
}

void checkValue(std::string_view value) {
  if (value.size() > kMaxValueBytes) {
    throw InvalidArgument("value of " + std::to_string(value.size()) +
                          " bytes exceeds the limit of " + std::to_string(kMaxValueBytes) +
                          " bytes");
  }
}

void checkBarrier(const BarrierArrival& arrival) {
  checkKey(arrival.name);
  if (arrival.worldSize <= 0 || arrival.worldSize > kMaxBarrierWorld) {
    throw InvalidArgument("barrier '" + arrival.name + "': world size " +
                          std::to_string(arrival.worldSize) + " is outside [1, " +
                          std::to_string(kMaxBarrierWorld) + "]");
  }
  if (arrival.ranks.size() > static_cast<size_t>(kMaxBarrierWorld)) {
    throw InvalidArgument("barrier '" + arrival.name + "': " +
                          std::to_string(arrival.ranks.size()) +
                          " ranks in one arrival, more than a barrier's largest world (" +
                          std::to_string(kMaxBarrierWorld) + ")");
  }
}

std::vector<int> arrivalRanks(const BarrierArrival& arrival) {
  return arrival.ranks.empty() ? std::vector<int>{arrival.rank} : arrival.ranks;
}

std::string arrivalRanksText(const BarrierArrival& arrival) {
  if (arrival.ranks.size() <= 1) {
    return "rank " + std::to_string(arrivalRanks(arrival).front());
  }
  std::vector<int> ranks = arrival.ranks;
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return (ranks.size() == 1 ? "rank " : "ranks ") + formatRanks(ranks);
}

void Store::setExpiringMany(const std::vector<KeyValue>& pairs, Millis ttl, Timeout timeout) {
  for (const KeyValue& kv : pairs) {
    checkKey(kv.first);
    checkValue(kv.second);
  }
  for (const KeyValue& kv : pairs) {
    setExpiring(kv.first, kv.second, ttl, timeout);
  }
}

std::optional<int64_t> parseCounter(std::string_view text) {
  int64_t value = 0;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  if (first != last && *first == '+') {
    return std::nullopt;
  }
  auto [ptr, ec] = std::from_chars(first, last, value);
  if (ec != std::errc() || ptr != last || first == last) {
    return std::nullopt;
  }
  return value;
}

}  // namespace resilient::store
