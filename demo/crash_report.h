// The demo trainer's crash report: a rank that dies of SIGSEGV, SIGBUS,
// SIGILL, SIGFPE or SIGABRT writes the signal and its call stack
// (module+offset per frame, for addr2line on the unstripped build) to stderr,
// then dies of the same signal, so that its exit status is unchanged.
#pragma once

namespace resilient::demo {

// Installs the handlers (on an alternate stack, so that a stack overflow is
// reported too). Call once, first thing in main.
void installCrashReport();

}  // namespace resilient::demo
