#include "tools/common/host_tool.h"

#include <signal.h>

#include <cstdio>
#include <exception>
#include <fstream>

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
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
  }
  std::rename(tmp.c_str(), path.c_str());
}

}  // namespace resilient::tools
