// The CPU allocator's cache of large blocks. A block of at least 4 MiB is 2 MiB aligned and
// advised as huge pages; mapping and zeroing it costs a page fault per huge page, and returning
// it to the system a TLB shootdown on every CPU the process runs on. Operators that allocate
// their outputs (a convolution's 6 MiB activation, a contiguous() of a large view) would pay
// that on every call, so a freed large block is kept and handed to the next request of the same
// rounded size.
// Guarantees: only whole blocks of exactly the requested rounded size are reused, never split or
// shared; the cached bytes never exceed the limit (least recently freed blocks go first); a block
// is reused only after the deleter of its previous owner returned, on any thread. Under
// AddressSanitizer a cached block is poisoned, so a use after free is still reported.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ferry {

struct CpuCacheStats {
  size_t cached_bytes = 0;   // held for reuse now
  size_t cached_blocks = 0;  // blocks held for reuse now
  size_t limit_bytes = 0;    // the most it will hold (0: the cache is off)
  uint64_t hits = 0;         // large allocations served from the cache
  uint64_t misses = 0;       // large allocations that went to the system
  uint64_t evictions = 0;    // cached blocks returned to the system to stay within the limit
};

CpuCacheStats cpu_cache_stats();

// Returns every cached block to the system.
void cpu_empty_cache();

// Sets the most the cache may hold (0 turns it off and empties it); returns the previous limit.
// The default is FERRY_CPU_CACHE_MB (whole MiB), else the smaller of 1 GiB and 1/16 of the
// machine's memory. A bad FERRY_CPU_CACHE_MB raises ferry::Error at the first large allocation.
size_t set_cpu_cache_limit(size_t bytes);

namespace detail {

// The default limit for a FERRY_CPU_CACHE_MB value (nullptr or empty: unset) and a machine with
// `physical_bytes` of memory; raises ferry::Error on anything but a whole number of MiB.
size_t cpu_cache_limit_from_env(const char* value, size_t physical_bytes);

// The allocator's side: a block of `bytes` rounded up to whole 2 MiB pages, and the context its
// deleter takes. acquire returns nullptr when the system has no memory left, even after the cache
// was emptied, and raises OutOfMemoryError for a size that rounds beyond the address space.
struct CpuBlock;
CpuBlock* acquire_cpu_block(size_t bytes);
void* cpu_block_data(const CpuBlock* block);
void release_cpu_block(void* block);  // a DeleterFn

}  // namespace detail
}  // namespace ferry
