// The profiler tests' fake clock: the shared one (tests/support/fake_clock.h).
#pragma once

#include "tests/support/fake_clock.h"
