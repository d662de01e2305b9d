#include "store/etcd/rpc.h"

#include <thread>

#include "common/log.h"
#include "store/backoff.h"
#include "store/errors.h"

namespace resilient::store::etcd {
namespace {

// gRPC status codes etcd's gateway reports in {"code": N}.
constexpr int kInvalidArgument = 3;
constexpr int kDeadlineExceeded = 4;
constexpr int kNotFound = 5;
constexpr int kPermissionDenied = 7;
constexpr int kResourceExhausted = 8;
constexpr int kFailedPrecondition = 9;
constexpr int kUnavailable = 14;
constexpr int kUnauthenticated = 16;

}  // namespace

int64_t jsonInt(const nlohmann::json& obj, const char* field) {
  auto it = obj.find(field);
  if (it == obj.end() || it->is_null()) {
    return 0;
  }
  if (it->is_string()) {
    return std::stoll(it->get<std::string>());
  }
  if (it->is_number_integer()) {
    return it->get<int64_t>();
  }
  if (it->is_boolean()) {
    return it->get<bool>() ? 1 : 0;
  }
  throw ProtocolError(std::string("etcd answer: field '") + field + "' is not an integer");
}

std::optional<nlohmann::json> answerOf(const std::string& ep, std::string_view path,
                                      const HttpResult& r, std::string* retryReason) {
  if (r.transport != HttpResult::Transport::kOk) {
    *retryReason = ep + ": " + r.error;
    return std::nullopt;
  }
  nlohmann::json answer = nlohmann::json::parse(r.body, nullptr, false);
  if (answer.is_discarded()) {
    *retryReason = ep + ": unparsable answer (HTTP " + std::to_string(r.status) + ")";
    return std::nullopt;
  }
  if (r.status == 200 && !answer.contains("error")) {
    return answer;
  }
  const int code = static_cast<int>(jsonInt(answer, "code"));
  const std::string msg = answer.value("message", answer.value("error", std::string("?")));
  switch (code) {
    case kInvalidArgument:
    case kFailedPrecondition:
      throw InvalidArgument("etcd " + ep + " refused " + std::string(path) + ": " + msg);
    case kPermissionDenied:
    case kUnauthenticated: throw AuthRefused("etcd " + ep + ": " + msg);
    case kNotFound:
      if (msg.find("lease") != std::string::npos) {
        throw LeaseNotFound("etcd " + ep + ": " + msg);
      }
      throw BackendError("etcd " + ep + ": " + msg);
    case kResourceExhausted: throw BackendError("etcd " + ep + ": " + msg);
    case kUnavailable:
    case kDeadlineExceeded:
    default: *retryReason = ep + ": " + msg; return std::nullopt;  // no leader, leader changed, timed out
  }
}

Rpc::Rpc(std::vector<std::string> endpoints, ClientOptions options)
    : endpoints_(std::move(endpoints)), options_(std::move(options)) {
  if (endpoints_.empty()) {
    throw InvalidArgument("an etcd store needs at least one endpoint");
  }
}

std::string Rpc::describe() const {
  std::string s = "etcd://";
  for (size_t i = 0; i < endpoints_.size(); ++i) {
    s += (i ? "," : "") + endpoints_[i];
  }
  return s;
}

void Rpc::memberFailed(size_t member) {
  // Move on from `member` unless another thread already did.
  size_t expected = member;
  current_.compare_exchange_strong(expected, (member + 1) % endpoints_.size());
}

nlohmann::json Rpc::call(std::string_view path, const nlohmann::json& body, TimePoint deadline) {
  const std::string payload = body.dump();
  Backoff backoff(options_.backoffInitial, options_.backoffMax);
  std::string lastError;
  size_t failures = 0;
  bool answered = false;     // some member answered, if only with an error
  bool unreachable = false;  // every attempt so far was refused a connection (and there was one)
  for (;;) {
    const auto left = std::chrono::duration_cast<Millis>(deadline - SteadyClock::now());
    if (left <= Millis(0)) {
      const std::string msg = "no etcd member of " + describe() + " completed " +
                              std::string(path) + " in time (" + std::to_string(failures) +
                              " failed attempts); last error: " +
                              (lastError.empty() ? std::string("deadline reached") : lastError);
      // Connection lost: no member could even be connected to. A member that
      // answered, one that was slow to, or no time for a first attempt (a
      // short deadline): a timeout.
      if (unreachable && !answered) {
        throw ConnectionLost(msg);
      }
      throw TimeoutError(msg);
    }
    const size_t member = currentMember();
    const std::string& ep = endpoints_[member];
    HttpResult r = http_.post(ep, path, payload, std::min(left, options_.memberTimeout));
    answered = answered || r.transport == HttpResult::Transport::kOk;
    unreachable = (failures == 0 || unreachable) &&
                  r.transport == HttpResult::Transport::kNotSent && !r.timedOut;
    if (std::optional<nlohmann::json> answer = answerOf(ep, path, r, &lastError)) {
      return std::move(*answer);
    }
    // This member cannot serve now: straight on to the next one; after a
    // whole round of failures, a pause (backoff with jitter).
    memberFailed(member);
    ++failures;
    if (failures % endpoints_.size() != 0) {
      continue;
    }
    const Millis delay = backoff.next();
    RES_INFO(log::kStore,
             "etcd store: %s failed on every member of %s (last: %s); retrying in %lld ms",
             std::string(path).c_str(), describe().c_str(), lastError.c_str(),
             static_cast<long long>(delay.count()));
    if (SteadyClock::now() + delay < deadline) {
      std::this_thread::sleep_for(delay);
    } else {
      std::this_thread::sleep_until(deadline);
    }
  }
}

}  // namespace resilient::store::etcd
