// Transitional, for restart/loop/job/health_exchange.*: blackbox/jobhealth_names.h.
#pragma once
#include "blackbox/jobhealth_names.h"
