// Cross-process tests: re-executing the running test binary as a child that runs only the current
// test, with an environment variable telling it which side to play and where the parent's socket
// listens (never fork() with live sim worker threads). Every wait is bounded: accepting the child
// polls in short slices and fails at once when the child exits early.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "ferry/device/ipc.h"

extern char** environ;

namespace ferry::testing {

// The socket path the parent passed to this process, or nullptr in the parent.
inline const char* child_socket_path(const char* variable) { return std::getenv(variable); }

// "@ferry-<what>-<pid>-<n>": an abstract-namespace socket name no other test uses.
inline std::string child_socket_name(const char* what) {
  static std::atomic<int> counter{0};
  return std::string("@ferry-") + what + "-" + std::to_string(::getpid()) + "-" +
         std::to_string(counter.fetch_add(1));
}

// Starts this binary running only the current test, with `variable`=`value` in its environment.
inline pid_t spawn_test_child(const char* variable, const std::string& value) {
  char exe[4096] = {};
  if (::readlink("/proc/self/exe", exe, sizeof(exe) - 1) <= 0) return -1;
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string filter =
      std::string("--gtest_filter=") + info->test_suite_name() + "." + info->name();
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  env_strings.push_back(std::string(variable) + "=" + value);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string arg0 = exe;
  std::string arg1 = filter;
  std::vector<char*> argv = {arg0.data(), arg1.data(), nullptr};
  pid_t child = -1;
  if (::posix_spawn(&child, exe, nullptr, nullptr, argv.data(), envp.data()) != 0) return -1;
  return child;
}

// Accepts the child's connection within `limit`; an empty connection (and a test failure) when
// the child exits first or does not connect in time.
inline IpcConnection accept_test_child(IpcListener& listener, pid_t child,
                                       std::chrono::seconds limit = std::chrono::seconds(120)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(child, &status, WNOHANG) != 0) {
      ADD_FAILURE() << "the child exited before connecting, status " << status;
      return IpcConnection();
    }
    pollfd p{listener.fd(), POLLIN, 0};
    if (::poll(&p, 1, 200) > 0) {
      IpcConnection connection = listener.accept(std::chrono::milliseconds(0));
      connection.set_timeout(std::chrono::seconds(120));
      return connection;
    }
  }
  ADD_FAILURE() << "the child did not connect within " << limit.count() << " s";
  return IpcConnection();
}

// Waits (bounded) for the child to exit; its exit status, or -1 on a signal or timeout.
inline int wait_test_child(pid_t child, std::chrono::seconds limit = std::chrono::seconds(120)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (::waitpid(child, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(child, SIGKILL);
      ::waitpid(child, &status, 0);
      return -1;
    }
    ::usleep(2000);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace ferry::testing
