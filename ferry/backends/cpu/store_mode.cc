// The store-mode rule of plan_copy (docs/kernels.md, "Store mode"): whether a copy writes its
// output with non-temporal (streaming) stores, from the output size per thread and the cache
// sizes read once at run time (sysconf, which glibc answers from cpuid).
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>

#include "ferry/backends/cpu/copy_tuning.h"
#include "ferry/core/error.h"

namespace ferry::cpu::tuning {
namespace {

int64_t cache_size(int name) {
  const long v = sysconf(name);
  return v > 0 ? static_cast<int64_t>(v) : 0;
}

StreamThresholds compute_thresholds() {
  if (const char* env = std::getenv("FERRY_STREAM_THRESHOLD"); env != nullptr && *env != '\0') {
    const int64_t t = parse_stream_threshold(env);
    return {t, t};
  }
  const int64_t threads = std::max<int64_t>(1, std::thread::hardware_concurrency());
  return stream_thresholds_for(cache_size(_SC_LEVEL2_CACHE_SIZE), cache_size(_SC_LEVEL3_CACHE_SIZE),
                               threads);
}

}  // namespace

int64_t l2_set_span_for(int64_t l2_bytes, int64_t l2_ways) {
  if (l2_bytes <= 0 || l2_ways <= 0 || l2_bytes % l2_ways != 0) return kFallbackL2SetSpan;
  return l2_bytes / l2_ways;
}

int64_t l2_set_span() {
  static const int64_t span =
      l2_set_span_for(cache_size(_SC_LEVEL2_CACHE_SIZE), cache_size(_SC_LEVEL2_CACHE_ASSOC));
  return span;
}

StreamThresholds stream_thresholds_for(int64_t l2_bytes, int64_t llc_bytes, int64_t threads) {
  const int64_t l2 = l2_bytes > 0 ? l2_bytes : kFallbackL2Bytes;
  StreamThresholds t;
  t.scattered = l2 / kScatteredL2Divisor;
  // glibc's rule (3/4 of this thread's share of the last-level cache), at most a few L2s.
  const int64_t cap = kSequentialL2Multiple * l2;
  const int64_t share = llc_bytes > 0 ? llc_bytes / std::max<int64_t>(threads, 1) / 4 * 3 : cap;
  t.sequential = std::max(t.scattered, std::min(share, cap));
  return t;
}

int64_t parse_stream_threshold(const char* text) {
  const std::string s(text);
  if (s == "never") return kStreamNever;
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  int shift = 0;
  if (end != text && *end != '\0' && end[1] == '\0') {
    const char u = *end;
    shift = u == 'K' || u == 'k' ? 10 : u == 'M' || u == 'm' ? 20 : u == 'G' || u == 'g' ? 30 : -1;
    if (shift >= 0) ++end;
  }
  FERRY_CHECK(end != text && *end == '\0' && v >= 0 && v < (int64_t{1} << 40),
              "FERRY_STREAM_THRESHOLD: expected a byte count (optionally with K, M or G) or "
              "\"never\", but got \"",
              s, "\"");
  return static_cast<int64_t>(v) << shift;
}

const StreamThresholds& stream_thresholds() {
  static const StreamThresholds thresholds = compute_thresholds();
  return thresholds;
}

}  // namespace ferry::cpu::tuning
