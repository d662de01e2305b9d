// The health comparison's data as JSON: a rank's sample (what the restart
// library ships through the store, one key per rank), a report (the store's
// report records, resilient-inspect --job --json) and the live standings.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "jobhealth/report.h"
#include "jobhealth/sample.h"
#include "jobhealth/slow_links.h"
#include "jobhealth/stragglers.h"

namespace resilient::jobhealth {

// An arrival is an array: [comm, index, rank, nranks, wall, previous end,
// function, sync wait].
nlohmann::json sampleJson(const RankSample& s);
// Refuses a malformed sample (invalid usage naming the field). An arrival of
// seven members (a build before the sync wait) reads with the sync wait
// unknown.
Result<RankSample> sampleFromJson(const nlohmann::json& j);

nlohmann::json reportJson(const HealthReport& r);
Result<HealthReport> reportFromJson(const nlohmann::json& j);

nlohmann::json standingsJson(const std::vector<LinkStanding>& links,
                             const std::vector<RankLateness>& ranks);

}  // namespace resilient::jobhealth
