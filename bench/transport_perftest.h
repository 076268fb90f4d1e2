// The process side of `ferry bench-transport` (bench/transport_bench.h): child processes with
// deadlines, and UCX's ucx_perftest as the baseline (a server and a client process on loopback,
// tag_lat or tag_bw, the "Final:" line parsed).
// Guarantees: a ChildProcess dies with this process (PR_SET_PDEATHSIG) and with its owner (the
// destructor kills and reaps it); it inherits no descriptor but its standard ones; every wait
// here has a deadline, after which the children are killed and ferry::Error is raised with what
// they printed.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ferry::bench {

using BenchClock = std::chrono::steady_clock;

class ChildProcess {
 public:
  // Starts argv[0] (a path) with `env` as its whole environment. With `capture`, its stdout and
  // stderr are read into output(); otherwise stdout goes to /dev/null and stderr is this one's.
  ChildProcess(const std::vector<std::string>& argv, const std::vector<std::string>& env,
               bool capture);
  ~ChildProcess();  // kills (SIGKILL) and reaps it if it still runs
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  bool running();                              // reaps it if it exited
  int exit_status() const { return status_; }  // WIFEXITED's status, or 128 + signal
  const std::string& output() const { return output_; }
  std::string output_tail(size_t max_chars = 2000) const;

  // Waits until every child exited, reading what they print; on the deadline kills them all and
  // raises ferry::Error naming `what`.
  static void wait_all(const std::vector<ChildProcess*>& children, BenchClock::time_point deadline,
                       const std::string& what);

 private:
  void read_some();
  void reap(int wait_status);
  pid_t pid_ = -1;
  int fd_ = -1;  // the read end of its output pipe, when captured
  int status_ = -1;
  std::string output_;
};

// This process's environment with `set` over it and `unset` removed, as KEY=VALUE entries.
std::vector<std::string> environment_with(const std::map<std::string, std::string>& set,
                                          const std::vector<std::string>& unset = {});

// 32 random hex digits: a secret for one benchmark's pair of processes.
std::string random_secret();

// A loopback TCP port nothing listens on at the moment of the call.
uint16_t free_loopback_port();

// The running executable's path (/proc/self/exe).
std::string this_exe_path();

// Sets environment variables for the life of this object, then restores them.
class ScopedEnv {
 public:
  explicit ScopedEnv(const std::map<std::string, std::string>& settings);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> old_;
};

// `name` itself when it holds a '/', else the first executable of that name on PATH; "" if none.
std::string find_executable(const std::string& name);

struct PerftestCase {
  std::string test;  // "tag_lat" or "tag_bw"
  uint64_t bytes = 8;
  int64_t iters = 1000;
  int64_t warmup = 100;
  int window = 1;  // -O: sends in flight (tag_bw)
};

struct PerftestResult {
  // tag_lat: the overall one-way latency in microseconds (half the round trip); tag_bw: the
  // overall bandwidth in MB/s (2^20 bytes per MB, as ucx_perftest counts).
  double value = 0;
  double p50 = 0;          // tag_lat: the median iteration's one-way latency (its 50.0%ile), us
  std::string transports;  // the client's UCX endpoint configuration, e.g. "tag(sysv/memory ...)"
  std::string version;     // "1.13.1"
};

// One ucx_perftest run: a server on a free loopback port, then the client, both with `ucx` in
// their environment and `extra_args` (split at spaces) among their options; each process is
// bounded by `timeout`. Raises ferry::Error when either fails.
PerftestResult run_perftest(const std::string& executable, const PerftestCase& c,
                            const std::map<std::string, std::string>& ucx,
                            const std::string& extra_args, std::chrono::seconds timeout);

}  // namespace ferry::bench
