// The device copy benchmark behind `ferry bench --devices`: copy_ between the host and a device
// and between devices (pinned and pageable host memory, blocking and non-blocking, dense and
// transposed), each timed to completion beside a baseline moving the same bytes. On the sim
// (bandwidth model off) the baseline is a host memcpy, so the ratio is the policy's overhead; on
// CUDA it is the raw link copy (pinned cudaMemcpyAsync), so the ratio is the share of the link's
// measured peak. See docs/device_copy.md.
// The bound is informational by default (timings on a shared machine are noisy); with
// `check` set, a violated bound, or one that could not be measured, makes the exit code non-zero.
#pragma once

#include <string>
#include <vector>

namespace ferry::bench {

struct DeviceBenchOptions {
  int repeat = 15;     // timed runs per case (median reported); at least 10
  std::string filter;  // ECMAScript regex on case names; empty = all
  bool quick = false;  // small sizes, a smoke test
  bool check = false;  // exit non-zero when the sim bound does not hold (see bound_exit_code)
};

// One case against the bound for the sim: a dense host-to-device copy costs at most
// 1.2 x a memcpy of the same bytes plus the fixed per-copy overhead (a tiny copy's time minus
// its memcpy's).
struct BoundLine {
  std::string name;
  double ms = 0;
  double memcpy_ms = 0;
  double overhead_ms = 0;
  double limit_ms() const { return 1.2 * memcpy_ms + overhead_ms; }
  bool holds() const { return ms <= limit_ms(); }
};

// The bench's exit code for the bound: 0 unless `check`; with it, 1 when a line does not hold
// and 2 when there is no line to judge (no sim device, or the cases were filtered out).
inline int bound_exit_code(const std::vector<BoundLine>& lines, bool check) {
  if (!check) return 0;
  if (lines.empty()) return 2;
  for (const BoundLine& line : lines) {
    if (!line.holds()) return 1;
  }
  return 0;
}

// Runs the device cases on the sim (and on CUDA when a GPU is present), prints the tables;
// returns the process exit code.
int run_device_copy_bench(const DeviceBenchOptions& options);

}  // namespace ferry::bench
