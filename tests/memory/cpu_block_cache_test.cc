// The CPU allocator's cache of large blocks: a freed block of 4 MiB or more comes back for the
// next request of its rounded size and no other, the cache keeps within its limit by dropping
// the least recently freed blocks, FERRY_CPU_CACHE_MB's parsing, threads that free and reuse
// blocks concurrently (run under TSan in CI), a fork while another thread holds the cache's lock,
// and, under ASan, a read of a cached block is reported.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ferry/core/cpu_block_cache.h"
#include "ferry/core/error.h"
#include "ferry/core/storage.h"
#include "ferry/core/tensor.h"
#include "ferry/ops/factories.h"
#include "tests/support/random.h"

namespace ferry::testing {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

Tensor bytes_tensor(size_t bytes) { return empty({static_cast<int64_t>(bytes)}, kByte); }

const void* address(const Tensor& t) { return t.data_ptr(); }

// Each test starts from an empty cache with a known limit and puts the previous limit back.
class CpuBlockCache : public ::testing::Test {
 protected:
  void SetUp() override {
    previous_limit_ = set_cpu_cache_limit(64 * kMiB);
    cpu_empty_cache();
  }
  void TearDown() override {
    cpu_empty_cache();
    set_cpu_cache_limit(previous_limit_);
  }

 private:
  size_t previous_limit_ = 0;
};

TEST_F(CpuBlockCache, AFreedLargeBlockServesTheNextRequestOfItsRoundedSizeOnly) {
  const CpuCacheStats before = cpu_cache_stats();
  const void* first;
  {
    Tensor t = bytes_tensor(6 * kMiB);
    first = address(t);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % (2 * kMiB), 0u) << "2 MiB aligned";
  }
  CpuCacheStats s = cpu_cache_stats();
  EXPECT_EQ(s.cached_blocks, 1u);
  EXPECT_EQ(s.cached_bytes, 6 * kMiB);
  EXPECT_EQ(s.misses, before.misses + 1);

  {
    Tensor other = bytes_tensor(8 * kMiB);  // rounds to 8 MiB: not the cached 6 MiB block
    EXPECT_NE(address(other), first);
    Tensor same = bytes_tensor(5 * kMiB + 1);  // rounds to 6 MiB
    EXPECT_EQ(address(same), first);
    s = cpu_cache_stats();
    EXPECT_EQ(s.hits, before.hits + 1);
    EXPECT_EQ(s.misses, before.misses + 2);
    EXPECT_EQ(s.cached_blocks, 0u);
    EXPECT_EQ(s.cached_bytes, 0u);
  }
  s = cpu_cache_stats();
  EXPECT_EQ(s.cached_bytes, 14 * kMiB);

  // Below 4 MiB the allocator does not use the cache at all.
  { Tensor small = bytes_tensor(3 * kMiB); }
  const CpuCacheStats after_small = cpu_cache_stats();
  EXPECT_EQ(after_small.cached_bytes, 14 * kMiB);
  EXPECT_EQ(after_small.hits + after_small.misses, s.hits + s.misses);
}

TEST_F(CpuBlockCache, KeepsWithinItsLimitDroppingTheLeastRecentlyFreedBlocksFirst) {
  set_cpu_cache_limit(12 * kMiB);
  const void* third;
  {
    Tensor a = bytes_tensor(4 * kMiB), b = bytes_tensor(4 * kMiB), c = bytes_tensor(4 * kMiB);
    third = address(c);
    a = Tensor();
    b = Tensor();
  }
  CpuCacheStats s = cpu_cache_stats();
  ASSERT_EQ(s.cached_bytes, 12 * kMiB);
  const uint64_t evictions = s.evictions;

  { Tensor big = bytes_tensor(6 * kMiB); }  // a and b make room for it, c stays
  s = cpu_cache_stats();
  EXPECT_EQ(s.cached_bytes, 10 * kMiB);
  EXPECT_EQ(s.cached_blocks, 2u);
  EXPECT_EQ(s.evictions, evictions + 2);
  EXPECT_EQ(address(bytes_tensor(4 * kMiB)), third);

  // A block larger than the whole limit is returned to the system at once.
  { Tensor huge = bytes_tensor(16 * kMiB); }
  EXPECT_LE(cpu_cache_stats().cached_bytes, 12 * kMiB);

  // Lowering the limit drops what no longer fits; zero turns the cache off.
  EXPECT_EQ(set_cpu_cache_limit(6 * kMiB), 12 * kMiB);
  EXPECT_LE(cpu_cache_stats().cached_bytes, 6 * kMiB);
  set_cpu_cache_limit(0);
  EXPECT_EQ(cpu_cache_stats().cached_bytes, 0u);
  { Tensor t = bytes_tensor(4 * kMiB); }
  EXPECT_EQ(cpu_cache_stats().cached_bytes, 0u);
  EXPECT_EQ(cpu_cache_stats().limit_bytes, 0u);
}

TEST_F(CpuBlockCache, EmptyCacheReturnsEveryBlock) {
  { Tensor a = bytes_tensor(4 * kMiB), b = bytes_tensor(10 * kMiB); }
  EXPECT_EQ(cpu_cache_stats().cached_bytes, 14 * kMiB);
  cpu_empty_cache();
  EXPECT_EQ(cpu_cache_stats().cached_bytes, 0u);
  EXPECT_EQ(cpu_cache_stats().cached_blocks, 0u);
}

std::string limit_error(const char* value) {
  try {
    detail::cpu_cache_limit_from_env(value, 32 * 1024 * kMiB);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(CpuBlockCacheLimit, ComesFromTheEnvironmentOrTheMachinesMemory) {
  EXPECT_EQ(detail::cpu_cache_limit_from_env("256", 32 * 1024 * kMiB), 256 * kMiB);
  EXPECT_EQ(detail::cpu_cache_limit_from_env("0", 32 * 1024 * kMiB), 0u);
  EXPECT_EQ(detail::cpu_cache_limit_from_env(nullptr, 32 * 1024 * kMiB), 1024 * kMiB);
  EXPECT_EQ(detail::cpu_cache_limit_from_env("", 8 * 1024 * kMiB), 512 * kMiB);
  for (const char* bad : {"abc", "-1", "12M", "1.5", "99999999999999999999"}) {
    const std::string message = limit_error(bad);
    EXPECT_NE(message.find("FERRY_CPU_CACHE_MB"), std::string::npos) << message;
    EXPECT_NE(message.find(std::string("\"") + bad + "\""), std::string::npos) << message;
  }
}

// Threads allocate, write, check and free blocks of a few sizes; each block must hold the
// owner's bytes until it frees it, whichever thread freed it last time.
TEST_F(CpuBlockCache, ThreadsFreeingAndReusingBlocksEachKeepTheirOwnBytes) {
  set_cpu_cache_limit(24 * kMiB);
  SCOPED_TRACE(seed_trace());
  const uint64_t seed = test_seed();
  constexpr int kThreads = 4, kRounds = 40;
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (int id = 0; id < kThreads; ++id) {
    threads.emplace_back([&, id] {
      std::mt19937_64 rng(seed + static_cast<uint64_t>(id));
      std::vector<Tensor> held;
      for (int r = 0; r < kRounds; ++r) {
        const size_t mib = size_t{4} + 2 * (rng() % 3);
        Tensor t = bytes_tensor(mib * kMiB);
        auto* p = static_cast<unsigned char*>(t.data_ptr());
        const auto mark = static_cast<unsigned char>(id * kRounds + r);
        const size_t n = static_cast<size_t>(t.numel());
        for (size_t at : {size_t{0}, n / 2, n - 64}) std::memset(p + at, mark, 64);
        std::this_thread::yield();
        for (size_t at : {size_t{0}, n / 2, n - 64}) {
          for (size_t k = 0; k < 64; ++k) failures[id] += p[at + k] != mark;
        }
        held.push_back(std::move(t));
        if (rng() % 2 == 0 || held.size() > 2) held.erase(held.begin());
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int id = 0; id < kThreads; ++id) EXPECT_EQ(failures[id], 0) << "thread " << id;
  EXPECT_LE(cpu_cache_stats().cached_bytes, 24 * kMiB);
}

// A child forked while another thread is inside the cache must still be able to allocate: the
// lock is held across fork, so the child's copy is never left locked. Every wait is bounded.
TEST_F(CpuBlockCache, AChildForkedWhileAnotherThreadUsesTheCacheCanAllocate) {
  std::atomic<bool> stop{false};
  std::thread churn([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      Tensor a = bytes_tensor(4 * kMiB), b = bytes_tensor(6 * kMiB);
    }
  });
  int failures = 0;
  for (int i = 0; i < 20; ++i) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // The child's only thread: the allocator's large path, straight (no dispatcher).
      DataPtr p = cpu_allocator()->allocate(4 * kMiB, Device(DeviceType::CPU));
      ::_exit(p ? 0 : 1);
    }
    int status = 0;
    pid_t done = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while ((done = ::waitpid(pid, &status, WNOHANG)) == 0 &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (done == 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      ++failures;
      ADD_FAILURE() << "child " << i << " did not finish within 10 s (a lock left held?)";
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      ++failures;
      ADD_FAILURE() << "child " << i << " failed, status " << status;
    }
  }
  stop = true;
  churn.join();
  EXPECT_EQ(failures, 0);
}

#if defined(__SANITIZE_ADDRESS__)
TEST_F(CpuBlockCache, ReadingACachedBlockIsReportedUnderAddressSanitizer) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const unsigned char* stale;
  {
    Tensor t = bytes_tensor(4 * kMiB);
    stale = static_cast<const unsigned char*>(t.data_ptr());
  }
  ASSERT_EQ(cpu_cache_stats().cached_blocks, 1u);
  EXPECT_DEATH(
      {
        volatile unsigned char v = stale[100];
        (void)v;
      },
      "use-after-poison");
}
#endif

}  // namespace
}  // namespace ferry::testing
