#include "tools/run/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>

#include "resilient/restart/errors.hpp"

extern char** environ;  // NOLINT(readability-redundant-declaration): posix_spawn's environment

namespace resilient::run {

pid_t startChild(std::vector<std::string> args, std::vector<std::string>* env,
                 const Redirects& redirects) {
  std::vector<char*> argv;
  for (std::string& a : args) {
    argv.push_back(a.data());
  }
  argv.push_back(nullptr);
  std::vector<char*> envp;
  if (env != nullptr) {
    for (std::string& e : *env) {
      envp.push_back(e.data());
    }
    envp.push_back(nullptr);
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (redirects.stdoutFd >= 0) {
    posix_spawn_file_actions_adddup2(&actions, redirects.stdoutFd, STDOUT_FILENO);
  } else if (!redirects.stdoutPath.empty()) {
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, redirects.stdoutPath.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  }
  if (!redirects.stderrPath.empty()) {
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, redirects.stderrPath.c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND, 0644);
  }
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(),
                              env != nullptr ? envp.data() : environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    throw std::runtime_error("cannot start " + args[0] + ": " + std::strerror(rc));
  }
  return pid;
}

std::string describeStatus(int status) {
  if (WIFEXITED(status)) {
    const int code = WEXITSTATUS(status);
    return "exit " + std::to_string(code) +
           (code == restart::kExitNeedsNewProcess ? " (left for a new process)"
            : code == restart::kExitWithdrew
                ? " (a joiner withdrew: its number was another process's)"
                : "");
  }
  if (WIFSIGNALED(status)) {
    return "signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  }
  return "status " + std::to_string(status);
}

}  // namespace resilient::run
