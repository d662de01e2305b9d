#include "restart/comm/store_rendezvous.h"

#include <algorithm>
#include <utility>

#include "resilient/restart/errors.hpp"
#include "store/errors.h"

namespace resilient::restart::comm {
namespace {

std::string millis(std::chrono::milliseconds t) {
  return std::to_string(t.count()) + " ms";
}

// Store failures other than a timeout, as the restart library reports them.
[[noreturn]] void rethrowStoreError(const store::StoreError& e, const std::string& what) {
  throw RestartError("rendezvous: " + what + ": store error (" + store::storeErrcName(e.code()) +
                     "): " + e.what());
}

bool named(const std::vector<std::string>& missing, const std::string& key) {
  return std::any_of(missing.begin(), missing.end(), [&](const std::string& m) {
    return m == key || (m.size() > key.size() && m.compare(m.size() - key.size(), key.size(),
                                                          key) == 0 &&
                        m[m.size() - key.size() - 1] == '/');
  });
}

}  // namespace

StoreRendezvous::StoreRendezvous(std::shared_ptr<store::Store> iterationStore, int rank,
                                 int members)
    : store_(std::move(iterationStore)), rank_(rank), members_(members) {
  if (store_ == nullptr) {
    throw InternalError("StoreRendezvous: no store");
  }
  if (members < 1 || rank < 0 || rank >= members) {
    throw InternalError("StoreRendezvous: rank " + std::to_string(rank) + " of " +
                        std::to_string(members) + " members");
  }
}

std::string StoreRendezvous::publishKey(std::string_view key) {
  return "publish/" + std::string(key);
}

std::string StoreRendezvous::gatherKey(std::string_view round, int rank) {
  return "gather/" + std::string(round) + "/" + std::to_string(rank);
}

void StoreRendezvous::publish(std::string_view key, std::string_view value) {
  const std::string k = publishKey(key);
  try {
    store_->set(k, value);
  } catch (const store::StoreError& e) {
    rethrowStoreError(e, "publishing '" + std::string(key) + "'");
  }
}

std::string StoreRendezvous::lookup(std::string_view key, std::chrono::milliseconds timeout) {
  const std::string k = publishKey(key);
  try {
    return store_->waitGet(k, store::Timeout(timeout));
  } catch (const store::TimeoutError&) {
    throw TimeoutError("rendezvous: '" + std::string(key) + "' was not published within " +
                       millis(timeout) + " (" + store_->describe() + ")");
  } catch (const store::StoreError& e) {
    rethrowStoreError(e, "looking up '" + std::string(key) + "'");
  }
}

std::vector<std::string> StoreRendezvous::allGather(std::string_view round, std::string_view mine,
                                                    std::chrono::milliseconds timeout) {
  const std::string what = "all-gather '" + std::string(round) + "'";
  std::vector<std::string> keys;
  keys.reserve(static_cast<size_t>(members_));
  for (int r = 0; r < members_; ++r) {
    keys.push_back(gatherKey(round, r));
  }
  const auto start = std::chrono::steady_clock::now();
  try {
    store_->set(keys[static_cast<size_t>(rank_)], mine, store::Timeout(timeout));
    const auto spent =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                              start);
    const auto rest = std::max(std::chrono::milliseconds(1), timeout - spent);
    store_->wait(keys, store::Timeout(rest));
    std::vector<std::optional<std::string>> values = store_->multiGet(keys, store::Timeout(rest));
    std::vector<std::string> out;
    out.reserve(values.size());
    for (size_t r = 0; r < values.size(); ++r) {
      if (!values[r]) {
        throw RestartError("rendezvous: " + what + ": rank " + std::to_string(r) +
                           "'s contribution vanished (was the iteration's prefix removed?)");
      }
      out.push_back(std::move(*values[r]));
    }
    return out;
  } catch (const store::TimeoutError& e) {
    std::vector<int> missing;
    for (int r = 0; r < members_; ++r) {
      if (named(e.missingKeys(), keys[static_cast<size_t>(r)])) {
        missing.push_back(r);
      }
    }
    throw TimeoutError("rendezvous: " + what + " incomplete after " + millis(timeout) +
                       (missing.empty() ? std::string(" (") + e.what() + ")"
                                        : "; missing ranks: " + store::formatRanks(missing)) +
                       " of " + std::to_string(members_));
  } catch (const store::StoreError& e) {
    rethrowStoreError(e, what);
  }
}

}  // namespace resilient::restart::comm
