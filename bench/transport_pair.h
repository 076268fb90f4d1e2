// ferry's side of `ferry bench-transport` (bench/transport_bench.h): this process and a peer it
// starts (the same executable, `ferry bench-transport --peer-of HOST:PORT`), connected by
// ferry::transport::Endpoint, run the benchmark's cases: ping-pong of an 8-byte tensor, and a
// one-way stream with a window of sends in flight into preallocated tensors. The peer learns each
// case from a command tensor sent over the same connection.
// Guarantees: every wait is bounded by the endpoints' timeout (--timeout); the peer is killed
// when this side fails and dies with this process; its secret is random per pair and travels only
// in its environment (FERRY_TRANSPORT_SECRET).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "bench/transport_bench.h"

namespace ferry::bench {

struct TransportCase {
  bool latency = false;  // ping-pong of 8 bytes; else one-way bandwidth
  uint64_t bytes = 8;
  int64_t warmup = 0;
  int64_t iters = 0;  // per timed repeat: round trips, or messages (ferry's pair may run fewer)
  int window = 1;     // sends in flight (bandwidth)
  int repeats = 1;    // timed repeats (median)
  bool has_target = false;
};

// One case's figures from ferry's pair.
struct PairFigures {
  double value = 0;   // latency: the mean half round trip, us; bandwidth: MB/s (2^20 bytes)
  double p50 = 0;     // latency: the median half round trip, us
  double p99 = 0;     // latency: the 99th percentile half round trip, us
  int64_t iters = 0;  // iterations per repeat: the plan's, fewer when a repeat would take over
                      // half a second (50 ms with --quick), judged from the warm-up
};

// Runs `cases` through ferry's pair with `ucx` (UCX_* settings) in both processes' environment,
// calling `done` after each case; returns ucp_ep_print_info's lanes and tag protocols of the
// connection. Raises ferry::Error when the pair fails.
std::string run_ferry_pair(const std::vector<TransportCase>& cases,
                           const std::map<std::string, std::string>& ucx,
                           const TransportBenchOptions& options,
                           const std::function<void(size_t, const PairFigures&)>& done);

}  // namespace ferry::bench
