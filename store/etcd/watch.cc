#include "store/etcd/watch.h"

#include <thread>

#include "common/log.h"
#include "store/backoff.h"
#include "store/etcd/base64.h"
#include "store/etcd/kv_api.h"

namespace resilient::store::etcd {

nlohmann::json watchCreateRequest(const std::string& key, int64_t fromRevision) {
  return {{"create_request",
           {{"key", base64Encode(key)}, {"start_revision", std::to_string(fromRevision)}}}};
}

WatchLine parseWatchLine(std::string_view line) {
  WatchLine out;
  nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || j.contains("error")) {
    out.kind = WatchLine::Kind::kError;
    out.error = j.is_discarded() ? "unparsable watch event" : j["error"].dump();
    return out;
  }
  const nlohmann::json& res = j.contains("result") ? j["result"] : j;
  if (res.value("canceled", false)) {
    out.kind = WatchLine::Kind::kCanceled;
    out.compacted = jsonInt(res, "compact_revision") > 0;
    out.error = "watch canceled: " + res.value("cancel_reason", std::string("?"));
    return out;
  }
  auto events = res.find("events");
  if (events != res.end() && events->is_array()) {
    for (const auto& ev : *events) {
      if (ev.value("type", std::string("PUT")) == "PUT") {
        out.kind = WatchLine::Kind::kPut;
        return out;
      }
    }
  }
  return out;
}

bool watchForPut(Rpc& rpc, const std::string& key, int64_t fromRevision, TimePoint deadline) {
  const Millis slice = std::max(Millis(5000), rpc.options().memberTimeout * 10);
  Backoff backoff(rpc.options().backoffInitial, rpc.options().backoffMax);
  int64_t next = fromRevision;
  while (SteadyClock::now() < deadline) {
    const size_t member = rpc.currentMember();
    const std::string& ep = rpc.endpoint(member);
    const nlohmann::json body = watchCreateRequest(key, next);
    bool found = false;
    bool compacted = false;
    std::string streamError;
    const auto onLine = [&](std::string_view line) {
      const WatchLine w = parseWatchLine(line);
      switch (w.kind) {
        case WatchLine::Kind::kMore: return true;
        case WatchLine::Kind::kPut: found = true; return false;
        case WatchLine::Kind::kCanceled: compacted = w.compacted; break;
        case WatchLine::Kind::kError: break;
      }
      streamError = w.error;
      return false;
    };
    const auto left = std::chrono::duration_cast<Millis>(deadline - SteadyClock::now());
    const auto started = SteadyClock::now();
    HttpResult r = rpc.http().stream(ep, kv::kWatchPath, body.dump(), std::min(left, slice), onLine);
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
