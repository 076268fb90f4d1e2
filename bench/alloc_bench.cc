// The allocation benchmark behind `ferry bench-alloc`: nanoseconds per allocate+free pair, for a
// few sizes, through the caching allocator (as a MemoryResource, and as device tensors via
// ferry::empty) against the backend's raw sim malloc/free and against std::malloc/std::free.
// Each figure is the median of repeated timed runs; the caches are warm, so the caching figures
// are the cached path (no backend call). The closing line counts how the caching allocator served
// the run: allocations in all, and of those how many missed the cache (one backend malloc each).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "ferry/core/error.h"
#include "ferry/device/backend.h"
#include "ferry/device/runtime.h"
#include "ferry/device/stream.h"
#include "ferry/ferry.h"
#include "ferry/memory/caching_allocator.h"
#include "ferry/memory/stats.h"

namespace ferry::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Keeps the compiler from eliding a malloc/free pair.
void escape(void* p) { asm volatile("" : : "g"(p) : "memory"); }

// The upper median (the higher of the middle two for an even count), not timing.h's mean of them.
double upper_median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Nanoseconds per call of `pair`, the median over `repeat` runs of `pairs` calls each.
double time_pairs(int repeat, int pairs, const std::function<void()>& pair) {
  for (int i = 0; i < std::max(1, pairs / 10); ++i) pair();  // warm caches and segments
  std::vector<double> runs;
  for (int r = 0; r < repeat; ++r) {
    const auto start = Clock::now();
    for (int i = 0; i < pairs; ++i) pair();
    const std::chrono::duration<double, std::nano> spent = Clock::now() - start;
    runs.push_back(spent.count() / pairs);
  }
  return upper_median(runs);
}

}  // namespace

// Declared in tools/alloc_bench_command.cc, which registers the subcommand.
int run_alloc_bench(int repeat, bool quick) {
  FERRY_CHECK(repeat >= 3, "bench-alloc --repeat: expected at least 3 timed runs, but got ",
              repeat);
  const Device dev("sim:0");
  checked_device(dev);  // a clear error when there is no sim device
  Backend& sim = get_backend(DeviceType::Sim);
  const Stream stream = current_stream(dev);
  memory::MemoryResource* cache = memory::caching_allocator();
  const int cached_pairs = quick ? 2000 : 20000;
  const memory::Stats before = memory::stats(dev);
  const int raw_pairs = quick ? 20 : 200;

  const std::vector<size_t> sizes = {512, size_t{64} << 10, size_t{1} << 20, size_t{8} << 20,
                                     size_t{64} << 20};
  std::printf(
      "ferry bench-alloc: ns per allocate+free pair on %s, upper_median of %d runs (cached pairs: "
      "%d "
      "per run; raw sim: %d per run)\n\n",
      dev.str().c_str(), repeat, cached_pairs, raw_pairs);
  std::printf("%10s %14s %14s %14s %14s %10s\n", "size", "cached (res.)", "cached empty()",
              "sim malloc", "std::malloc", "raw/cached");
  for (size_t n : sizes) {
    const double cached = time_pairs(repeat, cached_pairs, [&] {
      void* p = cache->allocate(n, stream);
      escape(p);
      cache->deallocate(p, n, stream);
    });
    const double tensor = time_pairs(repeat, cached_pairs, [&] {
      Tensor t = empty({static_cast<int64_t>(n)}, TensorOptions(kByte).device(dev));
      escape(t.data_ptr());
    });
    const double raw = time_pairs(repeat, raw_pairs, [&] {
      void* p = sim.malloc(0, n);
      escape(p);
      sim.free(0, p);
    });
    const double host = time_pairs(repeat, cached_pairs, [&] {
      void* p = std::malloc(n);
      escape(p);
      std::free(p);
    });
    std::printf("%10s %14.1f %14.1f %14.1f %14.1f %9.0fx\n", memory::format_bytes(n).c_str(),
                cached, tensor, raw, host, raw / cached);
  }
  // Every miss is served by exactly one new segment, so the backend mallocs are the misses.
  const memory::Stats after = memory::stats(dev);
  const long long allocations = after.allocation.allocated - before.allocation.allocated;
  const long long misses = after.num_device_alloc - before.num_device_alloc;
  std::printf(
      "\ncaching allocator on %s: %lld allocations, %lld served from the cache, %lld cache "
      "misses (backend mallocs)\n",
      dev.str().c_str(), allocations, allocations - misses, misses);
  memory::empty_cache(dev);
  return 0;
}

}  // namespace ferry::bench
