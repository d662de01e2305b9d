#include "tools/common/host_tool.h"

#include <signal.h>

#include <cstdio>
#include <exception>
#include <stdexcept>

#include "common/file_replace.h"

namespace resilient::tools {

int guardedMain(const char* tool, int (*run)(int argc, char** argv), int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", tool, e.what());
    return kExitUsage;
  }
}

void ignoreSigpipe() {
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, nullptr);
}

void writeFileAtomically(const std::string& path, const std::string& text) {
  if (Status s = replaceFile(path, text); !s.ok()) {
    throw std::runtime_error(s.toString());
  }
}

}  // namespace resilient::tools
