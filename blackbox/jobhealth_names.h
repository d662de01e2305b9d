// Transitional: the job's health comparison moved from blackbox/ to
// jobhealth/ (namespace resilient::jobhealth). restart/loop/health_exchange.*,
// being split in another change, still includes the old paths
// (blackbox/health_report.h, health_json.h, slow_links.h, stragglers.h,
// stuck_ranks.h, each now one line that includes this) and names these types
// blackbox::...; this header gives them those names. Remove it and the five
// once health_exchange includes jobhealth/ and says jobhealth::.
#pragma once

#include "jobhealth/json.h"
#include "jobhealth/report.h"
#include "jobhealth/sample.h"
#include "jobhealth/slow_links.h"
#include "jobhealth/stragglers.h"
#include "jobhealth/stuck_ranks.h"

namespace resilient::blackbox {

using jobhealth::describe;
using jobhealth::HealthReport;
using jobhealth::ProcessEnd;
using jobhealth::RankSample;
using jobhealth::reportFromJson;
using jobhealth::reportJson;
using jobhealth::sampleFromJson;
using jobhealth::sampleJson;
using jobhealth::sampleOf;
using jobhealth::SlowLinkDetector;
using jobhealth::SlowLinkOptions;
using jobhealth::StragglerDetector;
using jobhealth::StragglerOptions;
using jobhealth::StuckRankDetector;
using jobhealth::StuckRankOptions;
using jobhealth::toBlackboxRecord;

}  // namespace resilient::blackbox
