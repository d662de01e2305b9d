// One rank of resilient-nettest: loads the transport, joins the rendezvous,
// sets up the host engine, runs every size (in fault mode: again and again,
// until a fault or the window's end) and reports. Started by the tool's own
// launcher (launcher.h), it writes its result file there; started by hand
// (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), rank 0 prints the table.
#pragma once

#include "tools/harness/launcher.h"
#include "tools/nettest/config.h"

namespace resilient::nettest {

// The rank's exit status (tools/common/host_tool.h).
int runRank(const Config& c, const harness::Environment& env);

}  // namespace resilient::nettest
