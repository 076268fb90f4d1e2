// The oneDNN primitive cache of the CPU compute kernels (nn_kernels.h), seen from outside: its
// statistics and its capacity. The cache keys a built primitive by (kind, operand dtypes, sizes
// and strides, parameters, OpenMP team size), so a repeated call with the same shapes skips
// building primitive descriptors; it is thread-safe, bounded and evicts the least recently used.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ferry::cpu {

struct PrimitiveCacheStats {
  int64_t hits = 0;       // lookups that found a built primitive
  int64_t misses = 0;     // lookups that built one (or found that none can be built)
  int64_t evictions = 0;  // entries dropped to keep the size within the capacity
  size_t entries = 0;     // entries held now
  size_t capacity = 0;    // the most entries it holds
};

PrimitiveCacheStats primitive_cache_stats();
// 0 turns caching off (every call builds its primitive). The default is 1024 entries, or
// FERRY_DNNL_CACHE_CAPACITY when set to a non-negative integer.
void set_primitive_cache_capacity(size_t capacity);
// Drops every entry; the counters keep counting.
void clear_primitive_cache();

}  // namespace ferry::cpu
