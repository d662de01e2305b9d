// Marks a class of the public API whose type information must be the same
// in every library and program (exceptions users catch): default visibility
// even where a translation unit compiles with -fvisibility=hidden.
#pragma once

#define RESILIENT_RESTART_EXPORT __attribute__((visibility("default")))
