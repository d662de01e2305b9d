// Options from resolved knobs: what Options::fromEnvironment() reads from the
// process's (Params::global()), from any Params (tests: the defaults of the
// knobs against Options' own). Not exported.
#pragma once

#include <string>

#include "common/params.h"
#include "resilient/restart/options.hpp"

namespace resilient::restart {

Options optionsFrom(const config::Params& params);

// The blackbox directory in effect: Options::blackboxDir, or, empty (the
// default of a C++ Options), NCCL_RESILIENT_BLACKBOX_DIR as `params` resolve
// it (/dev/shm unless set), the directory the plugins write to.
std::string blackboxDirOf(const Options& options,
                          const config::Params& params = config::Params::global());

}  // namespace resilient::restart
