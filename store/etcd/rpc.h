// Calls to an etcd cluster's JSON gateway with member failover: a call goes
// to the current member; when that member cannot be reached, does not
// answer within the member timeout, or reports it cannot serve (no leader,
// leader changed, request timed out), the call moves to the next member and
// tries again, with backoff and jitter, until the call's deadline. Errors
// that retrying cannot cure (invalid request, permission) are thrown at once.
//
// Retrying is safe because every request the store sends is idempotent: puts
// and reads naturally, and every mutation whose result depends on the state
// (add, compareSet, remove) carries an operation marker (etcd_store.cc).
#pragma once

#include <atomic>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "store/client_options.h"
#include "store/errors.h"
#include "store/etcd/http_client.h"
#include "store/store.h"

namespace resilient::store::etcd {

// etcd no longer knows a lease (it expired): the caller grants a new one.
class LeaseNotFound : public BackendError {
 public:
  explicit LeaseNotFound(const std::string& message) : BackendError(message) {}
};

class Rpc {
 public:
  Rpc(std::vector<std::string> endpoints, ClientOptions options);

  // POSTs `body` to `path` ("/v3/kv/range", ...) and returns the answer.
  // Throws TimeoutError / ConnectionLost at the deadline, InvalidArgument,
  // AuthRefused or BackendError for errors etcd reports.
  nlohmann::json call(std::string_view path, const nlohmann::json& body, TimePoint deadline);

  // The member calls go to now, and a way to move on from it (watch streams).
  size_t currentMember() const noexcept { return current_.load(std::memory_order_relaxed); }
  void memberFailed(size_t member);
  const std::string& endpoint(size_t member) const {
    return endpoints_[member % endpoints_.size()];
  }
  size_t members() const noexcept { return endpoints_.size(); }

  HttpClient& http() { return http_; }
  const ClientOptions& options() const { return options_; }
  std::string describe() const;

 private:
  std::vector<std::string> endpoints_;
  ClientOptions options_;
  HttpClient http_;
  std::atomic<size_t> current_{0};
};

// What a member's HTTP result means: the answer when it is one; nullopt
// when the request may succeed on another try or member (`retryReason` says
// why: unreachable, no answer, no leader, timed out); throws the errors that
// retrying cannot cure (InvalidArgument, AuthRefused, LeaseNotFound,
// BackendError). Rpc::call's policy, for callers that do their own I/O.
std::optional<nlohmann::json> answerOf(const std::string& endpoint, std::string_view path,
                                       const HttpResult& result, std::string* retryReason);

// int64 fields arrive as JSON strings ("revision":"42"); absent means 0.
int64_t jsonInt(const nlohmann::json& obj, const char* field);

}  // namespace resilient::store::etcd
