// Randomized allocate / free / record_stream / empty_cache from several threads, with the
// allocator's invariants checked after every step (stats add up, blocks tile their segments
// exactly so no two live blocks overlap, free neighbours are merged). Meant for ThreadSanitizer
// as much as for the Release build.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>
#include <vector>

#include "ferry/device/guard.h"
#include "ferry/ferry.h"
#include "ferry/memory/caching_allocator.h"
#include "tests/memory/memory_fixture.h"
#include "tests/support/random.h"

namespace ferry::testing {
namespace {

#ifdef FERRY_SANITIZER_BUILD
constexpr int kStepsPerThread = 1500;
#else
constexpr int kStepsPerThread = 4000;
#endif
constexpr int kThreads = 4;
constexpr size_t kMaxLivePerThread = 8;

struct Live {
  Tensor tensor;
  size_t bytes;
};

size_t random_size(std::mt19937_64& rng) {
  const int kind = std::uniform_int_distribution<int>(0, 99)(rng);
  if (kind < 70) return std::uniform_int_distribution<size_t>(1, kMiB)(rng);  // small
  if (kind < 95) return std::uniform_int_distribution<size_t>(kMiB + 1, 12 * kMiB)(rng);
  return std::uniform_int_distribution<size_t>(12 * kMiB, 40 * kMiB)(rng);  // own segment
}

// Ranges of the live tensors of every thread must be disjoint.
void check_disjoint(std::vector<std::pair<uintptr_t, size_t>> ranges) {
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    ASSERT_LE(ranges[i - 1].first + ranges[i - 1].second, ranges[i].first)
        << "two live allocations overlap";
  }
}

class StressTest : public MemoryTest {};

TEST_F(StressTest, RandomAllocateFreeRecordFromSeveralThreads) {
  SCOPED_TRACE(seed_trace());
  const uint64_t seed = test_seed();
  // A cap of about 164 MiB makes the retry, garbage-collection and out-of-memory paths run now
  // and then; requests above 25 MiB are oversize.
  memory::set_alloc_conf("max_split_size_mb:25,garbage_collection_threshold:0.8");
  memory::set_memory_fraction(0.04, kSim0);
  std::vector<std::vector<Live>> live(kThreads);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  // What the threads did: a run in which everything was refused would otherwise pass.
  std::atomic<int64_t> attempts{0}, allocated{0}, ooms{0}, recorded{0}, freed{0};
  for (int tid = 0; tid < kThreads; ++tid) {
    threads.emplace_back([&, tid] {
      std::mt19937_64 rng(seed + static_cast<uint64_t>(tid) * 7919);
      std::vector<Live>& mine = live[static_cast<size_t>(tid)];
      const auto pick_stream = [&] {
        return Stream(kSim0, std::uniform_int_distribution<StreamId>(0, 3)(rng));
      };
      for (int step = 0; step < kStepsPerThread && failures.load() == 0; ++step) {
        const int action = std::uniform_int_distribution<int>(0, 99)(rng);
        try {
          if (action < 45 && mine.size() < kMaxLivePerThread) {
            StreamGuard guard(pick_stream());
            const size_t n = random_size(rng);
            ++attempts;
            mine.push_back(
                Live{empty({static_cast<int64_t>(n)}, TensorOptions(kByte).device(kSim0)), n});
            ++allocated;
          } else if (action < 80 && !mine.empty()) {
            const size_t i = std::uniform_int_distribution<size_t>(0, mine.size() - 1)(rng);
            mine.erase(mine.begin() + static_cast<std::ptrdiff_t>(i));
            ++freed;
          } else if (action < 95 && !mine.empty()) {
            // Record a stream that is made busy for a moment, so events are really pending.
            const Stream s = pick_stream();
            enqueue_host_function(
                s, [] { std::this_thread::sleep_for(std::chrono::microseconds(200)); });
            const size_t i = std::uniform_int_distribution<size_t>(0, mine.size() - 1)(rng);
            const Tensor& t = mine[i].tensor;
            if (t.numel() > 1) {
              t.slice(0, t.numel() / 2).record_stream(s);  // through a view with an offset
            } else {
              t.record_stream(s);
            }
            ++recorded;
          } else if (action >= 98) {
            memory::empty_cache(kSim0);
          }
        } catch (const OutOfMemoryError&) {
          // Expected now and then under the cap; it must leave the allocator consistent.
          ++ooms;
        } catch (const std::exception& e) {
          ADD_FAILURE() << "thread " << tid << " step " << step << ": " << e.what();
          ++failures;
        }
        try {
          memory::check_invariants(kSim0);
        } catch (const Error& e) {
          ADD_FAILURE() << "thread " << tid << " step " << step << ": " << e.what();
          ++failures;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(failures.load(), 0);
  // With at most 32 live tensors of mostly a few MiB under a 164 MiB cap, nearly every request
  // fits; out-of-memory errors are the exception (large requests meeting fragmentation).
  SCOPED_TRACE(::testing::Message()
               << attempts.load() << " allocations tried, " << allocated.load() << " made, "
               << ooms.load() << " out of memory, " << recorded.load() << " record_streams, "
               << freed.load() << " frees");
  EXPECT_EQ(attempts.load(), allocated.load() + ooms.load());
  EXPECT_GE(allocated.load() * 10, attempts.load() * 9) << "fewer than 90% of allocations worked";
  EXPECT_GE(recorded.load(), kThreads * kStepsPerThread / 10);
  EXPECT_GE(freed.load(), allocated.load() - kThreads * static_cast<int64_t>(kMaxLivePerThread));
  const memory::Stats during = memory::stats(kSim0);
  EXPECT_EQ(during.num_ooms, ooms.load());
  EXPECT_EQ(during.allocation.allocated, allocated.load());

  std::vector<std::pair<uintptr_t, size_t>> ranges;
  int64_t live_count = 0;
  for (const auto& per_thread : live) {
    for (const Live& l : per_thread) {
      ranges.emplace_back(reinterpret_cast<uintptr_t>(l.tensor.data_ptr()), l.bytes);
      ++live_count;
    }
  }
  check_disjoint(ranges);
  EXPECT_EQ(memory::stats(kSim0).allocation.current, live_count);
  live.clear();
  device_synchronize(kSim0);
  memory::empty_cache(kSim0);
  const memory::Stats st = memory::stats(kSim0);
  EXPECT_EQ(st.allocation.current, 0);
  EXPECT_EQ(st.active.current, 0);
  EXPECT_EQ(st.reserved_bytes.current, 0) << "empty_cache after everything is free keeps nothing";
  memory::check_invariants(kSim0);
}

}  // namespace
}  // namespace ferry::testing
