// ChildProcess, and ucx_perftest as the baseline of `ferry bench-transport` (see
// transport_perftest.h).
#if defined(FERRY_WITH_TRANSPORT)

#include "bench/transport_perftest.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "ferry/core/error.h"

extern char** environ;

namespace ferry::bench {

ChildProcess::ChildProcess(const std::vector<std::string>& argv,
                           const std::vector<std::string>& env, bool capture) {
  // Everything the child needs is built before fork: between fork and exec it makes only
  // async-signal-safe calls (this process may have other threads).
  std::vector<char*> args, envp;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  int pipe_fds[2] = {-1, -1};
  if (capture) {
    FERRY_CHECK(::pipe2(pipe_fds, O_CLOEXEC) == 0,
                "bench-transport: pipe2 failed: ", std::strerror(errno));
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the parent is already gone
    if (capture) {
      ::dup2(pipe_fds[1], STDOUT_FILENO);
      ::dup2(pipe_fds[1], STDERR_FILENO);
    } else {
      const int null_fd = ::open("/dev/null", O_WRONLY);
      if (null_fd >= 0) ::dup2(null_fd, STDOUT_FILENO);
    }
    ::close_range(3, ~0U, 0);
    ::execve(args[0], args.data(), envp.data());
    ::_exit(127);
  }
  const int fork_errno = errno;
  if (capture) ::close(pipe_fds[1]);
  if (pid < 0) {
    if (capture) ::close(pipe_fds[0]);
    FERRY_CHECK(false, "bench-transport: cannot start ", argv[0], ": ", std::strerror(fork_errno));
  }
  pid_ = pid;
  fd_ = capture ? pipe_fds[0] : -1;
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int st = 0;
    while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
  }
  if (fd_ >= 0) ::close(fd_);
}

void ChildProcess::reap(int wait_status) {
  pid_ = -1;
  status_ = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
}

bool ChildProcess::running() {
  if (pid_ <= 0) return false;
  int st = 0;
  if (::waitpid(pid_, &st, WNOHANG) == pid_) reap(st);
  return pid_ > 0;
}

void ChildProcess::read_some() {
  if (fd_ < 0) return;
  char buf[4096];
  const ssize_t n = ::read(fd_, buf, sizeof buf);
  if (n > 0) {
    output_.append(buf, static_cast<size_t>(n));
  } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
    ::close(fd_);
    fd_ = -1;
  }
}

std::string ChildProcess::output_tail(size_t max_chars) const {
  return output_.size() <= max_chars ? output_ : output_.substr(output_.size() - max_chars);
}

void ChildProcess::wait_all(const std::vector<ChildProcess*>& children,
                            BenchClock::time_point deadline, const std::string& what) {
  while (true) {
    std::vector<pollfd> fds;
    std::vector<ChildProcess*> owners;
    bool any_running = false;
    for (ChildProcess* c : children) {
      if (c->fd_ >= 0) {
        fds.push_back({c->fd_, POLLIN, 0});
        owners.push_back(c);
      }
      any_running = c->running() || any_running;
    }
    // Done when every child exited and its output was read to the end.
    if (!any_running && fds.empty()) return;
    if (BenchClock::now() >= deadline) break;
    if (fds.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    if (::poll(fds.data(), fds.size(), 5) > 0) {
      for (size_t i = 0; i < fds.size(); ++i) {
        if (fds[i].revents != 0) owners[i]->read_some();
      }
    }
  }
  std::string printed;
  for (ChildProcess* c : children) {
    if (c->pid_ > 0) {
      ::kill(c->pid_, SIGKILL);
      int st = 0;
      while (::waitpid(c->pid_, &st, 0) < 0 && errno == EINTR) {
      }
      c->reap(st);
    }
    if (!c->output_.empty()) printed += "\n" + c->output_tail();
  }
  FERRY_CHECK(false, "bench-transport: ", what, " did not finish in time and was killed", printed);
}

std::vector<std::string> environment_with(const std::map<std::string, std::string>& set,
                                          const std::vector<std::string>& unset) {
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const std::string key = entry.substr(0, entry.find('='));
    if (set.count(key) == 0 && std::find(unset.begin(), unset.end(), key) == unset.end()) {
      out.push_back(entry);
    }
  }
  for (const auto& [key, value] : set) out.push_back(key + "=" + value);
  return out;
}

std::string random_secret() {
  std::random_device rd;
  std::string out;
  const char* hex = "0123456789abcdef";
  for (int i = 0; i < 32; ++i) out += hex[rd() % 16];
  return out;
}

std::string this_exe_path() {
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  FERRY_CHECK(n > 0, "bench: cannot find this executable (/proc/self/exe): ", std::strerror(errno));
  return std::string(exe, static_cast<size_t>(n));
}

ScopedEnv::ScopedEnv(const std::map<std::string, std::string>& settings) {
  for (const auto& [key, value] : settings) {
    const char* old = std::getenv(key.c_str());
    old_.emplace_back(key, old != nullptr ? std::optional<std::string>(old) : std::nullopt);
    ::setenv(key.c_str(), value.c_str(), 1);
  }
}

ScopedEnv::~ScopedEnv() {
  for (const auto& [key, old] : old_) {
    if (old) {
      ::setenv(key.c_str(), old->c_str(), 1);
    } else {
      ::unsetenv(key.c_str());
    }
  }
}

std::string find_executable(const std::string& name) {
  if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

namespace perftest_detail {  // named: the tool is a unity build
namespace {

// A loopback TCP port nobody listens on right now (the server binds it a moment later).
uint16_t free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  FERRY_CHECK(fd >= 0, "bench-transport: socket failed: ", std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  ::close(fd);
  FERRY_CHECK(ok, "bench-transport: cannot find a free port: ", std::strerror(errno));
  return ntohs(addr.sin_port);
}

// Whether some socket listens on `port` (/proc/net/tcp and tcp6: state 0A is LISTEN).
bool port_listening(uint16_t port) {
  for (const char* file : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(file);
    std::string line;
    std::getline(in, line);  // the column names
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state;
      fields >> slot >> local >> remote >> state;
      const size_t colon = local.rfind(':');
      if (colon == std::string::npos || state != "0A") continue;
      if (std::strtoul(local.c_str() + colon + 1, nullptr, 16) == port) return true;
    }
  }
  return false;
}

// The numbers after "Final:" in ucx_perftest's output: iterations, latency 50%ile, average,
// overall (usec), bandwidth average, overall (MB/s), message rate average, overall.
std::vector<double> final_numbers(const std::string& output) {
  const size_t at = output.rfind("Final:");
  if (at == std::string::npos) return {};
  std::istringstream line(output.substr(at + 6, output.find('\n', at) - at - 6));
  std::vector<double> out;
  for (std::string token; line >> token;) out.push_back(std::strtod(token.c_str(), nullptr));
  return out;  // strtod, not >>: a column may read "inf" (an interval too short to time)
}

// The distinct endpoint configurations UCX logged at info level ("ep_cfg[0]: tag(...)").
std::string endpoint_configs(const std::string& output) {
  std::set<std::string> seen;
  std::string out;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    const size_t at = line.find("ep_cfg[");
    if (at == std::string::npos) continue;
    const size_t colon = line.find(": ", at);
    if (colon == std::string::npos) continue;
    std::string config = line.substr(colon + 2);
    config.erase(config.find_last_not_of(" \r") + 1);
    if (seen.insert(config).second) out += (out.empty() ? "" : "; ") + config;
  }
  return out;
}

std::string ucx_version(const std::string& output) {
  const size_t at = output.find("Version ");
  if (at == std::string::npos) return "";
  const size_t end = output.find_first_of(" \n", at + 8);
  return output.substr(at + 8, end - at - 8);
}

}  // namespace
}  // namespace perftest_detail

uint16_t free_loopback_port() { return perftest_detail::free_port(); }

PerftestResult run_perftest(const std::string& executable, const PerftestCase& c,
                            const std::map<std::string, std::string>& ucx,
                            const std::string& extra_args, std::chrono::seconds timeout) {
  // UCX_LOG_LEVEL=info makes UCX print its version and each endpoint's transports once, at
  // setup: nothing is logged while the test runs.
  std::map<std::string, std::string> settings = ucx;
  settings["UCX_LOG_LEVEL"] = "info";
  const std::vector<std::string> env = environment_with(settings, {"FERRY_TRANSPORT_SECRET"});
  std::vector<std::string> extra;
  std::istringstream words(extra_args);
  for (std::string w; words >> w;) extra.push_back(w);
  const std::string port = std::to_string(perftest_detail::free_port());
  const std::string label = "ucx_perftest " + c.test + " -s " + std::to_string(c.bytes);
  std::vector<std::string> server_args = {executable, "-p", port};
  server_args.insert(server_args.end(), extra.begin(), extra.end());
  ChildProcess server(server_args, env, /*capture=*/true);
  const auto deadline = BenchClock::now() + timeout;
  while (!perftest_detail::port_listening(static_cast<uint16_t>(std::stoi(port)))) {
    if (!server.running()) {
      ChildProcess::wait_all({&server}, deadline, label + " (server)");
      FERRY_CHECK(false, "bench-transport: the ", label, " server exited with status ",
                  server.exit_status(), " before listening:\n", server.output_tail());
    }
    FERRY_CHECK(BenchClock::now() < deadline, "bench-transport: the ", label,
                " server did not listen on port ", port, " within ", timeout.count(), " s");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  std::vector<std::string> args = {executable, "127.0.0.1",
                                   "-p",       port,
                                   "-t",       c.test,
                                   "-s",       std::to_string(c.bytes),
                                   "-n",       std::to_string(c.iters),
                                   "-w",       std::to_string(c.warmup)};
  if (c.test == "tag_bw") {
    args.push_back("-O");
    args.push_back(std::to_string(c.window));
  }
  args.insert(args.end(), extra.begin(), extra.end());
  ChildProcess client(args, env, /*capture=*/true);
  const auto end = BenchClock::now() + timeout;
  ChildProcess::wait_all({&client}, end, label + " (client)");
  // The server ends with the test; a few seconds more at most once the client is gone.
  ChildProcess::wait_all({&server}, std::min(end, BenchClock::now() + std::chrono::seconds(5)),
                         label + " (server)");
  const std::vector<double> numbers = perftest_detail::final_numbers(client.output());
  FERRY_CHECK(client.exit_status() == 0 && numbers.size() >= 6, "bench-transport: ", label,
              " failed: client status ", client.exit_status(), ", server status ",
              server.exit_status(), "; the client printed:\n", client.output_tail(),
              "\nthe server printed:\n", server.output_tail());
  PerftestResult r;
  r.value = c.test == "tag_lat" ? numbers[3] : numbers[5];
  r.p50 = numbers[1];
  r.transports = perftest_detail::endpoint_configs(client.output());
  r.version = perftest_detail::ucx_version(client.output());
  return r;
}

}  // namespace ferry::bench

#endif  // FERRY_WITH_TRANSPORT
