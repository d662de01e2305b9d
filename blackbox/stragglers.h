// Transitional, for restart/loop/health_exchange.*: blackbox/jobhealth_names.h.
#pragma once
#include "blackbox/jobhealth_names.h"
