#include "jobhealth/json.h"

#include <exception>
#include <string>

namespace resilient::jobhealth {
namespace {

nlohmann::json endJson(const ProcessEnd& e) {
  return {{"rank", e.rank}, {"host", e.host}, {"pid", e.pid}, {"address", e.address}};
}

ProcessEnd endFromJson(const nlohmann::json& j) {
  return {j.at("rank").get<int>(), j.at("host").get<std::string>(), j.at("pid").get<uint32_t>(),
          j.at("address").get<std::string>()};
}

}  // namespace

nlohmann::json sampleJson(const RankSample& s) {
  nlohmann::json links = nlohmann::json::array();
  for (const auto& l : s.links) {
    links.push_back({{"comm_id", l.commId},
                     {"send", l.send},
                     {"local", l.local},
                     {"peer", l.peer},
                     {"peer_pid", l.peerPid},
                     {"peer_host", l.peerHost},
                     {"bytes", l.bytes},
                     {"busy_ns", l.busyNs},
                     {"rtt_ns", l.rttNs}});
  }
  nlohmann::json arrivals = nlohmann::json::array();
  for (const auto& a : s.arrivals) {
    arrivals.push_back({a.commId, a.collIndex, a.rank, a.nranks, a.wallNs, a.prevEndWallNs,
                        a.function, a.syncWaitNs});
  }
  nlohmann::json inside = nlohmann::json::array();
  for (const auto& i : s.inside) {
    inside.push_back({i.commId, i.collIndex, i.wallNs, i.function});
  }
  return {{"rank", s.rank},
          {"pid", s.pid},
          {"host", s.host},
          {"wall_ns", s.wallNs},
          {"links", links},
          {"arrivals", arrivals},
          {"last_ping_wall_ns", s.lastPingWallNs},
          {"waiting_declared", s.waitingDeclared},
          {"inside", inside}};
}

Result<RankSample> sampleFromJson(const nlohmann::json& j) {
  try {
    RankSample s;
    s.rank = j.at("rank").get<int>();
    s.pid = j.at("pid").get<uint32_t>();
    s.host = j.at("host").get<std::string>();
    s.wallNs = j.at("wall_ns").get<uint64_t>();
    for (const auto& l : j.at("links")) {
      s.links.push_back({l.at("comm_id").get<uint64_t>(), l.at("send").get<bool>(),
                         l.at("local").get<std::string>(), l.at("peer").get<std::string>(),
                         l.at("peer_pid").get<uint32_t>(), l.at("peer_host").get<std::string>(),
                         l.at("bytes").get<uint64_t>(), l.at("busy_ns").get<uint64_t>(),
                         l.at("rtt_ns").get<uint64_t>()});
    }
    for (const auto& a : j.at("arrivals")) {
      // Seven members from a build before the GPU-timed sync wait: unknown.
      if (!a.is_array() || (a.size() != 7 && a.size() != 8)) {
        return invalidUsage(
            "health sample: an arrival is not [comm, index, rank, nranks, wall, previous end, "
            "function, sync wait]");
      }
      s.arrivals.push_back({a[0].get<uint64_t>(), a[1].get<uint64_t>(), a[2].get<int>(),
                            a[3].get<int>(), a[4].get<uint64_t>(), a[5].get<uint64_t>(),
                            a[6].get<std::string>(), a.size() == 8 ? a[7].get<uint64_t>() : 0});
    }
    s.lastPingWallNs = j.at("last_ping_wall_ns").get<uint64_t>();
    s.waitingDeclared = j.at("waiting_declared").get<bool>();
    for (const auto& i : j.at("inside")) {
      if (!i.is_array() || i.size() != 4) {
        return invalidUsage("health sample: an inside entry is not [comm, index, wall, function]");
      }
      s.inside.push_back({i[0].get<uint64_t>(), i[1].get<uint64_t>(), i[2].get<uint64_t>(),
                          i[3].get<std::string>()});
    }
    return s;
  } catch (const std::exception& e) {
    return invalidUsage(std::string("malformed health sample: ") + e.what());
  }
}

nlohmann::json reportJson(const HealthReport& r) {
  nlohmann::json j = {{"kind", reportKindName(r.kind)},
                      {"comm_id", r.commId},
                      {"wall_ns", r.wallNs},
                      {"subject", endJson(r.subject)},
                      {"window_ns", r.windowNs},
                      {"restarts", r.restarts},
                      {"text", describe(r)}};
  if (r.kind == HealthReport::Kind::kSlowLink) {
    j["peer"] = endJson(r.peer);
    j["bytes_per_s"] = r.bytesPerS;
    j["reference_bytes_per_s"] = r.referenceBytesPerS;
    j["ratio"] = r.ratio;
    j["against_history"] = r.againstHistory;
  } else if (r.kind == HealthReport::Kind::kStuckRank) {
    j["coll_index"] = r.collIndex;
    j["function"] = r.function;
    j["waiting_ranks"] = r.waitingRanks;
    j["waited_ns"] = r.waitedNs;
    j["min_lag_ns"] = r.minLagNs;
  } else {
    j["collectives"] = r.collectives;
    j["waited"] = r.waited;
    j["last_count"] = r.lastCount;
    j["lag_ns"] = r.lagNs;
    j["min_lag_ns"] = r.minLagNs;
  }
  return j;
}

Result<HealthReport> reportFromJson(const nlohmann::json& j) {
  try {
    HealthReport r;
    const auto kind = j.at("kind").get<std::string>();
    const std::optional<HealthReport::Kind> parsed = parseReportKind(kind);
    if (!parsed) {
      return invalidUsage("health report: unknown kind '" + kind + "'");
    }
    r.kind = *parsed;
    r.commId = j.at("comm_id").get<uint64_t>();
    r.wallNs = j.at("wall_ns").get<uint64_t>();
    r.subject = endFromJson(j.at("subject"));
    r.windowNs = j.at("window_ns").get<uint64_t>();
    r.restarts = j.at("restarts").get<bool>();
    if (r.kind == HealthReport::Kind::kSlowLink) {
      r.peer = endFromJson(j.at("peer"));
      r.bytesPerS = j.at("bytes_per_s").get<double>();
      r.referenceBytesPerS = j.at("reference_bytes_per_s").get<double>();
      r.ratio = j.at("ratio").get<double>();
      r.againstHistory = j.at("against_history").get<bool>();
    } else if (r.kind == HealthReport::Kind::kStuckRank) {
      r.collIndex = j.at("coll_index").get<uint64_t>();
      r.function = j.at("function").get<std::string>();
      r.waitingRanks = j.at("waiting_ranks").get<int>();
      r.waitedNs = j.at("waited_ns").get<uint64_t>();
      r.minLagNs = j.at("min_lag_ns").get<uint64_t>();
    } else {
      r.collectives = j.at("collectives").get<int>();
      r.waited = j.at("waited").get<int>();
      r.lastCount = j.at("last_count").get<int>();
      r.lagNs = j.at("lag_ns").get<uint64_t>();
      r.minLagNs = j.at("min_lag_ns").get<uint64_t>();
    }
    return r;
  } catch (const std::exception& e) {
    return invalidUsage(std::string("malformed health report: ") + e.what());
  }
}

nlohmann::json standingsJson(const std::vector<LinkStanding>& links,
                             const std::vector<RankLateness>& ranks) {
  nlohmann::json out = {{"links", nlohmann::json::array()}, {"ranks", nlohmann::json::array()}};
  for (const auto& l : links) {
    out["links"].push_back({{"comm_id", l.commId},
                            {"from", endJson(l.from)},
                            {"to", endJson(l.to)},
                            {"bytes_per_s", l.bytesPerS},
                            {"busy_fraction", l.busyFraction},
                            {"ratio", l.ratio},
                            {"slow", l.slow}});
  }
  for (const auto& r : ranks) {
    out["ranks"].push_back({{"comm_id", r.commId},
                            {"rank", endJson(r.rank)},
                            {"collectives", r.collectives},
                            {"waited", r.waited},
                            {"last_count", r.lastCount},
                            {"lag_ns", r.lagNs},
                            {"score", r.score},
                            {"straggler", r.straggler}});
  }
  return out;
}

}  // namespace resilient::jobhealth
