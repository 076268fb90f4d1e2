// The cache of large CPU blocks (see cpu_block_cache.h): one list of freed blocks, least
// recently freed first, under one mutex (held across fork, so a child never inherits it locked).
// Blocks go to and come from the system outside it.
#include "ferry/core/cpu_block_cache.h"

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <vector>

#include "ferry/core/error.h"

#if defined(__SANITIZE_ADDRESS__)
#define FERRY_CPU_CACHE_POISONS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FERRY_CPU_CACHE_POISONS 1
#endif
#endif
#if defined(FERRY_CPU_CACHE_POISONS)
#include <sanitizer/asan_interface.h>
#endif

namespace ferry {
namespace detail {

struct CpuBlock {
  void* data;
  size_t bytes;
};

}  // namespace detail

namespace {

using detail::CpuBlock;

constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kDefaultLimitCap = size_t{1} << 30;

void poison(const CpuBlock& b) {
#if defined(FERRY_CPU_CACHE_POISONS)
  ASAN_POISON_MEMORY_REGION(b.data, b.bytes);
#else
  (void)b;
#endif
}

void unpoison(const CpuBlock& b) {
#if defined(FERRY_CPU_CACHE_POISONS)
  ASAN_UNPOISON_MEMORY_REGION(b.data, b.bytes);
#else
  (void)b;
#endif
}

void free_block(CpuBlock* b) {
  unpoison(*b);
  std::free(b->data);
  delete b;
}

size_t physical_memory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return static_cast<size_t>(pages) * static_cast<size_t>(page_size);
}

class BlockCache {
 public:
  CpuBlock* acquire(size_t bytes) {
    {
      std::lock_guard lock(mutex_);
      limit_locked();  // a bad FERRY_CPU_CACHE_MB raises here, before anything is allocated
      // The most recently freed block of this size: its pages are the likeliest still in cache.
      for (auto it = free_.rbegin(); it != free_.rend(); ++it) {
        if ((*it)->bytes != bytes) continue;
        CpuBlock* b = *it;
        free_.erase(std::next(it).base());
        cached_bytes_ -= bytes;
        ++hits_;
        unpoison(*b);
        return b;
      }
      ++misses_;
    }
    void* p = std::aligned_alloc(kHugePage, bytes);
    if (p == nullptr) {
      // Cached blocks of other sizes may be what the system is missing.
      empty();
      p = std::aligned_alloc(kHugePage, bytes);
      if (p == nullptr) return nullptr;
    }
#ifdef MADV_HUGEPAGE
    ::madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return new CpuBlock{p, bytes};
  }

  void release(CpuBlock* b) {
    std::vector<CpuBlock*> evicted;
    {
      std::lock_guard lock(mutex_);
      const size_t limit = limit_ ? *limit_ : 0;  // no acquire read the environment: keep none
      if (b->bytes <= limit) {
        evict_locked(limit - b->bytes, evicted);
        poison(*b);
        free_.push_back(b);
        cached_bytes_ += b->bytes;
        b = nullptr;
      }
    }
    if (b != nullptr) free_block(b);
    for (CpuBlock* e : evicted) free_block(e);
  }

  void empty() {
    std::vector<CpuBlock*> all;
    {
      std::lock_guard lock(mutex_);
      all.swap(free_);
      cached_bytes_ = 0;
    }
    for (CpuBlock* b : all) free_block(b);
  }

  size_t set_limit(size_t bytes) {
    std::vector<CpuBlock*> evicted;
    size_t previous = 0;
    {
      std::lock_guard lock(mutex_);
      try {
        previous = limit_locked();
      } catch (const Error&) {
        // A malformed FERRY_CPU_CACHE_MB never took effect; the program's own setting replaces it.
      }
      limit_ = bytes;
      evict_locked(bytes, evicted);
    }
    for (CpuBlock* e : evicted) free_block(e);
    return previous;
  }

  void lock_for_fork() { mutex_.lock(); }
  void unlock_after_fork() { mutex_.unlock(); }

  CpuCacheStats stats() {
    std::lock_guard lock(mutex_);
    CpuCacheStats s;
    s.cached_bytes = cached_bytes_;
    s.cached_blocks = free_.size();
    s.limit_bytes = limit_ ? *limit_ : 0;
    s.hits = hits_;
    s.misses = misses_;
    s.evictions = evictions_;
    return s;
  }

 private:
  size_t limit_locked() {
    if (!limit_) {
      limit_ =
          detail::cpu_cache_limit_from_env(std::getenv("FERRY_CPU_CACHE_MB"), physical_memory());
    }
    return *limit_;
  }

  // Takes the least recently freed blocks off the list until at most `keep` bytes are cached.
  void evict_locked(size_t keep, std::vector<CpuBlock*>& evicted) {
    size_t drop = 0;
    while (cached_bytes_ > keep) {
      cached_bytes_ -= free_[drop]->bytes;
      evicted.push_back(free_[drop++]);
    }
    free_.erase(free_.begin(), free_.begin() + static_cast<std::ptrdiff_t>(drop));
    evictions_ += drop;
  }

  std::mutex mutex_;
  std::vector<CpuBlock*> free_;  // least recently freed first
  size_t cached_bytes_ = 0;
  std::optional<size_t> limit_;  // read from the environment at the first large allocation
  uint64_t hits_ = 0, misses_ = 0, evictions_ = 0;
};

BlockCache& cache() {
  // Never destroyed: tensors held by other static objects may be freed during exit.
  static BlockCache* instance = [] {
    // A fork while another thread holds the mutex would leave the child's copy locked forever;
    // holding it across fork (as glibc does with malloc's own locks) gives the child a free one.
    // The handlers run only after this initialization has finished.
    ::pthread_atfork([] { cache().lock_for_fork(); }, [] { cache().unlock_after_fork(); },
                     [] { cache().unlock_after_fork(); });
    return new BlockCache;
  }();
  return *instance;
}

}  // namespace

CpuCacheStats cpu_cache_stats() { return cache().stats(); }

void cpu_empty_cache() { cache().empty(); }

size_t set_cpu_cache_limit(size_t bytes) { return cache().set_limit(bytes); }

namespace detail {

size_t cpu_cache_limit_from_env(const char* value, size_t physical_bytes) {
  if (value == nullptr || *value == '\0') return std::min(kDefaultLimitCap, physical_bytes / 16);
  char* end = nullptr;
  errno = 0;
  const long long mib = std::strtoll(value, &end, 10);
  constexpr long long kMaxMiB = static_cast<long long>(SIZE_MAX / kMiB);
  FERRY_CHECK(end != value && *end == '\0' && errno == 0 && mib >= 0 && mib <= kMaxMiB,
              "FERRY_CPU_CACHE_MB: expected a whole number of MiB (0 turns the cache off), but "
              "got \"",
              value, "\"");
  return static_cast<size_t>(mib) * kMiB;
}

CpuBlock* acquire_cpu_block(size_t bytes) {
  // Rounding up to whole huge pages must not wrap around to a small request.
  size_t padded = 0;
  FERRY_CHECK_AS(OutOfMemoryError, !__builtin_add_overflow(bytes, kHugePage - 1, &padded),
                 "cpu: failed to allocate ", bytes,
                 " bytes of host memory (expected a size that rounds up to whole 2 MiB pages, "
                 "but it is beyond the address space)");
  return cache().acquire(padded / kHugePage * kHugePage);
}

void* cpu_block_data(const CpuBlock* block) { return block->data; }

void release_cpu_block(void* block) { cache().release(static_cast<CpuBlock*>(block)); }

}  // namespace detail
}  // namespace ferry
