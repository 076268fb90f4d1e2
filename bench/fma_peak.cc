// Measures the float32 FMA peak (fma_peak.h): twelve independent FMA chains per thread keep both
// FMA pipes of a Zen core busy (4-cycle latency x 2 pipes needs 8), timed on every thread at
// once; one dependent chain gives the FMA latency, from which the clock can be cross-checked.
#include "bench/fma_peak.h"

#include <immintrin.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>

#include "ferry/iter/parallel.h"

namespace ferry::bench {
namespace {

constexpr int kChains = 12;

double now_ns() {
  return std::chrono::duration<double, std::nano>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The results feed this sink so that the loops cannot be dropped.
std::atomic<float> sink{0};

#define FERRY_FMA_CHAINS(FMA) \
  FMA(a0) FMA(a1) FMA(a2) FMA(a3) FMA(a4) FMA(a5) FMA(a6) FMA(a7) FMA(a8) FMA(a9) FMA(a10) FMA(a11)

__attribute__((target("avx512f"))) void chains_avx512(int64_t iters) {
  const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-6f);
  __m512 a0 = _mm512_set1_ps(0.f), a1 = _mm512_set1_ps(1.f), a2 = _mm512_set1_ps(2.f),
         a3 = _mm512_set1_ps(3.f), a4 = _mm512_set1_ps(4.f), a5 = _mm512_set1_ps(5.f),
         a6 = _mm512_set1_ps(6.f), a7 = _mm512_set1_ps(7.f), a8 = _mm512_set1_ps(8.f),
         a9 = _mm512_set1_ps(9.f), a10 = _mm512_set1_ps(10.f), a11 = _mm512_set1_ps(11.f);
#define FERRY_FMA512(x) x = _mm512_fmadd_ps(x, m, c);
  for (int64_t i = 0; i < iters; ++i) {
    FERRY_FMA_CHAINS(FERRY_FMA512)
  }
#undef FERRY_FMA512
  const __m512 s =
      _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                                  _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7))),
                    _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
  alignas(64) float out[16];
  _mm512_store_ps(out, s);
  sink.store(out[0] + out[15], std::memory_order_relaxed);
}

__attribute__((target("avx2,fma"))) void chains_avx2(int64_t iters) {
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-6f);
  __m256 a0 = _mm256_set1_ps(0.f), a1 = _mm256_set1_ps(1.f), a2 = _mm256_set1_ps(2.f),
         a3 = _mm256_set1_ps(3.f), a4 = _mm256_set1_ps(4.f), a5 = _mm256_set1_ps(5.f),
         a6 = _mm256_set1_ps(6.f), a7 = _mm256_set1_ps(7.f), a8 = _mm256_set1_ps(8.f),
         a9 = _mm256_set1_ps(9.f), a10 = _mm256_set1_ps(10.f), a11 = _mm256_set1_ps(11.f);
#define FERRY_FMA256(x) x = _mm256_fmadd_ps(x, m, c);
  for (int64_t i = 0; i < iters; ++i) {
    FERRY_FMA_CHAINS(FERRY_FMA256)
  }
#undef FERRY_FMA256
  const __m256 s =
      _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                                  _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7))),
                    _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11)));
  alignas(32) float out[8];
  _mm256_store_ps(out, s);
  sink.store(out[0] + out[7], std::memory_order_relaxed);
}

#undef FERRY_FMA_CHAINS

// One dependent chain: each FMA waits for the previous one.
__attribute__((target("avx2,fma"))) void chain_latency(int64_t iters) {
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-6f);
  __m256 a = _mm256_set1_ps(1.f);
  for (int64_t i = 0; i < iters; ++i) a = _mm256_fmadd_ps(a, m, c);
  alignas(32) float out[8];
  _mm256_store_ps(out, a);
  sink.store(out[0], std::memory_order_relaxed);
}

using Kernel = void (*)(int64_t);

// Seconds for `threads` threads to each run kernel(iters), started together.
double run_threads(Kernel kernel, int64_t iters, int threads) {
  if (threads <= 1) {
    const double t0 = now_ns();
    kernel(iters);
    return (now_ns() - t0) * 1e-9;
  }
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> workers;
  for (int t = 1; t < threads; ++t) {
    workers.emplace_back([&] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) {
      }
      kernel(iters);
    });
  }
  while (ready.load() != threads - 1) {
  }
  const double t0 = now_ns();
  go.store(true, std::memory_order_release);
  kernel(iters);
  for (std::thread& w : workers) w.join();
  return (now_ns() - t0) * 1e-9;
}

// Vector FMAs per second over all threads: the best of five runs of about 10 ms.
double fma_rate(Kernel kernel, int fmas_per_iter, int threads) {
  int64_t iters = 1 << 14;
  while (run_threads(kernel, iters, 1) < 2e-3) iters *= 2;
  iters *= 5;  // about 10 ms
  double best = 0;
  for (int r = 0; r < 5; ++r) {
    const double s = run_threads(kernel, iters, threads);
    best = std::max(best, static_cast<double>(iters) * fmas_per_iter * threads / s);
  }
  return best;
}

// For its lifetime, the calling thread runs on the thread pool's CPUs, then gets its own mask
// back: an OpenMP binding of the caller (OMP_PROC_BIND) must not put the measurement on one CPU.
// The measuring threads, started from it meanwhile, inherit the same CPUs.
class OnPoolCpus {
 public:
  OnPoolCpus() {
    CPU_ZERO(&saved_);
    saved_valid_ = pthread_getaffinity_np(pthread_self(), sizeof(saved_), &saved_) == 0;
    ferry::detail::use_pool_cpus();
  }
  ~OnPoolCpus() {
    if (saved_valid_) pthread_setaffinity_np(pthread_self(), sizeof(saved_), &saved_);
  }
  OnPoolCpus(const OnPoolCpus&) = delete;
  OnPoolCpus& operator=(const OnPoolCpus&) = delete;

 private:
  cpu_set_t saved_;
  bool saved_valid_ = false;
};

}  // namespace

FmaPeak measure_fma_peak(int threads) {
  const OnPoolCpus on_pool_cpus;
  FmaPeak p;
  p.threads = std::max(threads, 1);
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool avx512 = __builtin_cpu_supports("avx512f");
  if (!avx2) {
    p.isa = "none";
    return p;
  }
  const double avx2_rate = fma_rate(&chains_avx2, kChains, p.threads);
  p.avx2_gflops_per_thread = avx2_rate * 8 * 2 / p.threads * 1e-9;
  double rate = avx2_rate;
  p.isa = "AVX2";
  p.lanes = 8;
  if (avx512) {
    const double avx512_rate = fma_rate(&chains_avx512, kChains, p.threads);
    // Whichever width does more flops is the peak (a CPU that splits 512-bit FMAs in two gains
    // nothing from them, and the wider kernel then counts as the peak only if it is faster).
    if (avx512_rate * 16 > avx2_rate * 8) {
      rate = avx512_rate;
      p.isa = "AVX-512";
      p.lanes = 16;
    }
  }
  p.gflops = rate * p.lanes * 2 * 1e-9;
  p.gflops_per_thread = p.gflops / p.threads;
  p.fma_per_ns = rate / p.threads * 1e-9;
  // Latency: one thread, one chain.
  int64_t iters = 1 << 16;
  double best = 1e30;
  for (int r = 0; r < 5; ++r) {
    const double s = run_threads(&chain_latency, iters * 8, 1);
    best = std::min(best, s * 1e9 / static_cast<double>(iters * 8));
  }
  p.latency_ns = best;
  return p;
}

std::string describe(const FmaPeak& p) {
  if (p.isa == "none") return "no AVX2/FMA on this CPU: peak not measured";
  // With a 4-cycle FMA latency (AMD Zen 2 to 5, Intel since Skylake) the dependent chain gives
  // the clock, and the independent chains the FMAs issued per cycle.
  const double ghz = 4.0 / p.latency_ns;
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "FMA peak %.1f GFLOP/s = %d thread(s) x %.1f: measured, %s (%d float32 lanes) x "
                "12 independent FMA chains on each thread at once: %.2f vector FMAs/ns/thread "
                "x %d lanes x 2 flops (AVX2 loop: %.1f GFLOP/s/thread); a dependent chain takes "
                "%.3f ns/FMA, i.e. %.2f GHz if the FMA latency is 4 cycles, so %.2f FMAs/cycle",
                p.gflops, p.threads, p.gflops_per_thread, p.isa.c_str(), p.lanes, p.fma_per_ns,
                p.lanes, p.avx2_gflops_per_thread, p.latency_ns, ghz, p.fma_per_ns / ghz);
  return buf;
}

}  // namespace ferry::bench
