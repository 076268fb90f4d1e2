// The machine's float32 FMA peak, measured rather than looked up: timed FMA loops on the widest
// vectors the CPU runs (AVX-512 or AVX2), on as many threads at once as the benchmark uses, so
// that the peak reflects this machine's clock and FMA units as they are now (a VM, turbo,
// shared cores). Used by `ferry bench-ops` for matmul's fraction of peak.
#pragma once

#include <string>

namespace ferry::bench {

struct FmaPeak {
  std::string isa;                    // "AVX-512", "AVX2" or "none"
  int lanes = 0;                      // float32 lanes per vector of that ISA
  int threads = 0;                    // threads that ran the loop at once
  double gflops = 0;                  // all threads together: lanes x 2 flops x FMAs per second
  double gflops_per_thread = 0;       // gflops / threads
  double fma_per_ns = 0;              // vector FMAs per ns on one thread (independent chains)
  double latency_ns = 0;              // one thread's dependent chain: ns per FMA
  double avx2_gflops_per_thread = 0;  // the same loop on 256-bit vectors (0 without AVX2)
};

// Measures the peak with `threads` threads (best of a few runs of about 10 ms each).
FmaPeak measure_fma_peak(int threads);

// One line on how the peak was obtained, for the table's preamble.
std::string describe(const FmaPeak& peak);

}  // namespace ferry::bench
