// The transport benchmark behind `ferry bench-transport` (ferry/transport, docs/transport.md):
// two processes on this host, this one and a peer it starts (the same executable, `ferry
// bench-transport --peer-of HOST:PORT`), measure ping-pong latency of an 8-byte tensor and
// one-way bandwidth from 4 KiB to 1 GiB through ferry::transport::Endpoint, then UCX's own
// ucx_perftest (tag_lat, tag_bw) with the same UCX settings, sizes, iterations and window (ferry's
// pair runs fewer iterations when it is slow), never both pairs at once. Per transport (shm:
// shared memory for the data, tcp: loopback TCP) it prints ferry, ucx_perftest, their ratio and
// the targets (latency <= 1.5x, judged on the median round trip; bandwidth >= 0.9x at 1 MiB and
// above), and the UCX transports each used; progress goes to stderr. For diagnosis: more UCX
// settings (--ucx), more ucx_perftest options (--perftest-args, e.g. -e for its endpoints to handle
// errors as ferry's do), polling Future::ready() instead of waiting (--poll), distinct receive
// buffers (--recv-buffers). Guarantees: every wait has a deadline (EndpointOptions::timeout for
// ferry's pair, the same bound per process for ucx_perftest's); a child that misses it is killed,
// and children die with this process (PR_SET_PDEATHSIG). The peer's secret is random per run and
// travels only in its environment (FERRY_TRANSPORT_SECRET).
#pragma once

#include <string>
#include <vector>

namespace ferry::bench {

struct TransportBenchOptions {
  std::vector<std::string> tls = {"shm", "tcp"};  // one table each
  std::vector<std::string> cases = {"latency", "bandwidth"};
  std::vector<std::string> sizes;  // bandwidth sizes ("4K" ... "1G"); empty: all of them
  std::vector<std::string> ucx;    // more UCX_NAME=VALUE settings for both pairs
  std::string perftest_args;       // more ucx_perftest options (both processes), e.g. "-e"
  int repeat = 5;                  // timed repeats per case (median), ferry and ucx_perftest alike
  int timeout_s = 60;              // the bound on every wait, and on each ucx_perftest process
  std::string perftest = "ucx_perftest";  // the baseline's executable (PATH is searched)
  bool quick = false;    // sizes up to 16 MiB, few iterations: a smoke test (targets not judged)
  bool poll = false;     // both processes poll Future::ready() before wait() (a diagnosis)
  int recv_buffers = 1;  // distinct destinations of the bandwidth receiver (1, as ucx_perftest)
};

// Runs the benchmark and prints one table per transport; returns the process exit code: 1 when
// ferry's pair failed, or (except with --quick) a target was missed or has no baseline figure.
int run_transport_bench(const TransportBenchOptions& options);

// The peer process: connects to HOST:PORT with the secret in $FERRY_TRANSPORT_SECRET and serves
// the benchmark's commands until told to stop (options: timeout_s, poll, recv_buffers). Returns
// the exit code.
int run_transport_bench_peer(const std::string& host_port, const TransportBenchOptions& options);

}  // namespace ferry::bench
