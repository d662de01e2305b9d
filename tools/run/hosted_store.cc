#include "tools/run/hosted_store.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <utility>
#include <vector>

#include "tools/run/child_process.h"

namespace resilient::run {

std::string storeProgram() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (const auto& candidate : {self.parent_path() / "resilient-store",
                                  self.parent_path().parent_path() / "store" / "resilient-store"}) {
      if (::access(candidate.c_str(), X_OK) == 0) {
        return candidate.string();
      }
    }
  }
  return "resilient-store";
}

HostedStore::HostedStore(std::string listen, std::string logPath)
    : listen_(std::move(listen)), logPath_(std::move(logPath)) {}

HostedStore::~HostedStore() {
  stop();
}

void HostedStore::start() {
  int out[2] = {-1, -1};
  if (::pipe2(out, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("store: pipe: ") + std::strerror(errno));
  }
  const std::string program = storeProgram();
  Redirects redirects;
  redirects.stdoutFd = out[1];
  redirects.stderrPath = logPath_;
  pid_t pid = 0;
  try {
    pid = startChild({program, "--listen", listen_}, nullptr, redirects);
  } catch (...) {
    ::close(out[0]);
    ::close(out[1]);
    throw;
  }
  ::close(out[1]);
  pid_ = pid;
  // "resilient-store serving tcp://HOST:PORT (bound ..., token ...)"
  std::string line;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (line.find('\n') == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{out[0], POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) {
      break;
    }
    std::array<char, 256> buf{};
    const ssize_t n = ::read(out[0], buf.data(), buf.size());
    if (n <= 0) {
      break;
    }
    line.append(buf.data(), static_cast<size_t>(n));
  }
  ::close(out[0]);
  const size_t at = line.find("tcp://");
  if (at == std::string::npos) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = 0;
    throw std::runtime_error(program + " --listen " + listen_ + " did not serve: \"" + line + "\"");
  }
  url_ = line.substr(at, line.find_first_of(" \n", at) - at);
  // The same address from now on, also after a restart.
  listen_ = url_.substr(6);
}

void HostedStore::restart(int status) {
  std::fprintf(stderr,
               "resilient-run: WARN: the job's store (pid %d) ended: %s; starting it again on %s "
               "(the ranks put their state back; training goes on)\n",
               static_cast<int>(pid_), describeStatus(status).c_str(), listen_.c_str());
  pid_ = 0;
  ++restarts_;
  start();
  std::fprintf(stderr, "resilient-run: the job's store serves again on %s (pid %d)\n",
               url_.c_str(), static_cast<int>(pid_));
}

void HostedStore::stop() {
  if (pid_ <= 0) {
    return;
  }
  ::kill(pid_, SIGTERM);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = 0;
}

}  // namespace resilient::run
