#include "restart/store/etcd/watch.h"

#include <thread>

#include "plugin/common/log.h"
#include "restart/store/backoff.h"
#include "restart/store/etcd/base64.h"
#include "restart/store/etcd/kv_api.h"

namespace resilient::store::etcd {

bool watchForPut(Rpc& rpc, const std::string& key, int64_t fromRevision, TimePoint deadline) {
  const Millis slice = std::max(Millis(5000), rpc.options().memberTimeout * 10);
  Backoff backoff(rpc.options().backoffInitial, rpc.options().backoffMax);
  int64_t next = fromRevision;
  const std::string encodedKey = base64Encode(key);
  while (SteadyClock::now() < deadline) {
    const size_t member = rpc.currentMember();
    const std::string& ep = rpc.endpoint(member);
    nlohmann::json body = {
        {"create_request", {{"key", encodedKey}, {"start_revision", std::to_string(next)}}}};
    bool found = false;
    bool compacted = false;
    std::string streamError;
    const auto onLine = [&](std::string_view line) {
      nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || j.contains("error")) {
        streamError = j.is_discarded() ? "unparsable watch event" : j["error"].dump();
        return false;
      }
      const nlohmann::json& res = j.contains("result") ? j["result"] : j;
      if (res.value("canceled", false)) {
        compacted = jsonInt(res, "compact_revision") > 0;
        streamError = "watch canceled: " + res.value("cancel_reason", std::string("?"));
        return false;
      }
      auto events = res.find("events");
      if (events != res.end() && events->is_array()) {
        for (const auto& ev : *events) {
          if (ev.value("type", std::string("PUT")) == "PUT") {
            found = true;
            return false;
          }
        }
      }
      return true;
    };
    const auto left = std::chrono::duration_cast<Millis>(deadline - SteadyClock::now());
    const auto started = SteadyClock::now();
    HttpResult r = rpc.http().stream(ep, "/v3/watch", body.dump(), std::min(left, slice), onLine);
    if (found) {
      return true;
    }
    if (compacted) {
      // The history from `next` is gone: read the key instead.
      nlohmann::json answer = rpc.call("/v3/kv/range", kv::range(key, {{}, true}), deadline);
      if (kv::count(answer) > 0) {
        return true;
      }
      next = kv::revision(answer) + 1;
      continue;
    }
    if (SteadyClock::now() >= deadline) {
      break;
    }
    // The stream ended without the event: a member that failed, refused, or
    // stayed quiet for a whole slice. Resume on the next member.
    rpc.memberFailed(member);
    if (SteadyClock::now() - started < Millis(200)) {
      RES_INFO(log::kStore, "etcd store: watch on %s failed (%s)", ep.c_str(),
               !streamError.empty() ? streamError.c_str() : r.error.c_str());
      std::this_thread::sleep_for(std::min(
          backoff.next(), std::chrono::duration_cast<Millis>(deadline - SteadyClock::now())));
    }
  }
  return false;
}

}  // namespace resilient::store::etcd
