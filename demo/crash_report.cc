#include "crash_report.h"

#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace resilient::demo {
namespace {

constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
alignas(16) char altStack[64 * 1024];

void onCrash(int sig, siginfo_t* info, void*) {
  // Async-signal-safe only: snprintf into a stack buffer is not strictly so,
  // but formats no floating point and allocates nothing with glibc.
  char line[160];
  const int n = std::snprintf(line, sizeof line,
                              "resilient-demo-train: pid %d killed by %s (code %d, address %p); "
                              "call stack:\n",
                              static_cast<int>(::getpid()), ::sigabbrev_np(sig), info->si_code,
                              info->si_addr);
  if (n > 0) {
    (void)!::write(STDERR_FILENO, line, static_cast<size_t>(n) < sizeof line ? n : sizeof line - 1);
  }
  void* frames[64];
  const int depth = ::backtrace(frames, 64);
  ::backtrace_symbols_fd(frames, depth, STDERR_FILENO);
  ::raise(sig);  // SA_RESETHAND: the default action now, on return from this handler
}

}  // namespace

void installCrashReport() {
  // backtrace() loads libgcc on first use, which allocates: do it here, not
  // in the handler.
  void* warm[1];
  (void)::backtrace(warm, 1);
  stack_t ss{};
  ss.ss_sp = altStack;
  ss.ss_size = sizeof altStack;
  ::sigaltstack(&ss, nullptr);
  struct sigaction sa{};
  sa.sa_sigaction = onCrash;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  for (int sig : kSignals) {
    ::sigaction(sig, &sa, nullptr);
  }
}

}  // namespace resilient::demo
