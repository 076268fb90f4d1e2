// The device copy benchmark behind `ferry bench --devices`: copy_ between the host and a device
// and between devices (pinned and pageable host memory, blocking and non-blocking, dense and
// transposed), each timed to completion beside a baseline moving the same bytes. On the sim
// (bandwidth model off) the baseline is a host memcpy, so the ratio is the policy's overhead; on
// CUDA it is the raw link copy (pinned cudaMemcpyAsync), so the ratio is the share of the link's
// measured peak. See docs/device_copy.md.
#pragma once

#include <string>

namespace ferry::bench {

struct DeviceBenchOptions {
  int repeat = 15;     // timed runs per case (median reported); at least 10
  std::string filter;  // ECMAScript regex on case names; empty = all
  bool quick = false;  // small sizes, a smoke test
};

// Runs the device cases on the sim (and on CUDA when a GPU is present), prints the tables;
// returns the process exit code.
int run_device_copy_bench(const DeviceBenchOptions& options);

}  // namespace ferry::bench
