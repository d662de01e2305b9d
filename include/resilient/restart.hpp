// The restart library's C++ API (libresilient-restart.so, pkg-config
// resilient-restart): wrap a training function with Wrapper and it is called
// again, on a re-formed job, after every fault. docs/restart.md explains the
// loop, the hooks, the policies and what a wrapped function must do.
#pragma once

#include "resilient/restart/communicator.hpp"
#include "resilient/restart/errors.hpp"
#include "resilient/restart/health.hpp"
#include "resilient/restart/hooks.hpp"
#include "resilient/restart/host_communicator.hpp"
#include "resilient/restart/nccl_communicator.hpp"
#include "resilient/restart/options.hpp"
#include "resilient/restart/rank_assignment.hpp"
#include "resilient/restart/state.hpp"
#include "resilient/restart/timeline.hpp"
#include "resilient/restart/tree.hpp"
#include "resilient/restart/world.hpp"
#include "resilient/restart/wrapper.hpp"
