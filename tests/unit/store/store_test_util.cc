#include "tests/unit/store/store_test_util.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>

extern char** environ;  // NOLINT

namespace resilient::test {

store::ClientOptions testClientOptions() {
  store::ClientOptions o;
  o.name = store::defaultClientName();
  o.defaultTimeout = std::chrono::milliseconds(20000);
  o.connectTimeout = std::chrono::milliseconds(10000);
  o.reconnectTimeout = std::chrono::milliseconds(2000);
  o.memberTimeout = std::chrono::milliseconds(1500);
  return o;
}

bool Expectations::expect(bool ok, const std::string& what) {
  if (!ok) {
    std::lock_guard<std::mutex> lock(mu_);
    failures_.push_back(what);
  }
  return ok;
}

std::vector<std::string> Expectations::failures() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failures_;
}

void runThreads(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  std::mutex mu;
  std::exception_ptr first;
  threads.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      try {
        fn(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!first) {
          first = std::current_exception();
        }
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  if (first) {
    std::rethrow_exception(first);
  }
}

ChildProcess::ChildProcess(const std::vector<std::string>& argv) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw std::runtime_error("pipe2 failed");
  }
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv) {
    args.push_back(const_cast<char*>(a.c_str()));
  }
  args.push_back(nullptr);
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ == 0) {
    // Only async-signal-safe calls until exec. The child dies with the test
    // (even when the test is killed), so no server or etcd member outlives it.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) {
      ::_exit(127);
    }
    ::dup2(fds[1], 1);
    ::execve(args[0], args.data(), environ);
    ::_exit(127);
  }
  ::close(fds[1]);
  out_ = fds[0];
  if (pid_ < 0) {
    ::close(out_);
    throw std::runtime_error("cannot spawn " + argv[0]);
  }
}

ChildProcess::~ChildProcess() {
  if (!reaped_ && pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  if (out_ >= 0) {
    ::close(out_);
  }
}

std::string ChildProcess::readLine(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const size_t nl = buffered_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buffered_.substr(0, nl);
      buffered_.erase(0, nl + 1);
      return line;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    pollfd p{out_, POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) {
      return "";
    }
    char buf[512];
    const ssize_t n = ::read(out_, buf, sizeof buf);
    if (n <= 0) {
      return "";
    }
    buffered_.append(buf, static_cast<size_t>(n));
  }
}

void ChildProcess::kill(int sig) {
  if (!reaped_) {
    ::kill(pid_, sig);
  }
}

int ChildProcess::wait(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      reaped_ = true;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // polling a child's exit
  }
}

std::string storeBinary() {
  const char* bin = std::getenv("RESILIENT_STORE_BIN");  // NOLINT(concurrency-mt-unsafe)
  if (bin == nullptr) {
    throw std::runtime_error("RESILIENT_STORE_BIN is not set (run through meson test)");
  }
  return bin;
}

std::unique_ptr<ChildProcess> spawnStoreServer(const std::string& token, uint16_t* port) {
  auto child = std::make_unique<ChildProcess>(
      std::vector<std::string>{storeBinary(), "--listen", "127.0.0.1:0", "--token", token});
  const std::string line = child->readLine(std::chrono::milliseconds(10000));
  // "resilient-store serving tcp://127.0.0.1:PORT (bound ...)"
  const size_t at = line.find("tcp://");
  const size_t colon = line.find(':', at + 6);
  const size_t end = line.find(' ', colon);
  if (at == std::string::npos || colon == std::string::npos) {
    throw std::runtime_error("resilient-store did not print its address: '" + line + "'");
  }
  *port = static_cast<uint16_t>(std::stoi(line.substr(colon + 1, end - colon - 1)));
  return child;
}

}  // namespace resilient::test
