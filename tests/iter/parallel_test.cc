// parallel_for: coverage of the range, chunking by grain size, nesting, concurrency from several
// caller threads, exceptions, set_num_threads and ThreadCapGuard.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include "ferry/core/error.h"
#include "ferry/iter/parallel.h"

namespace ferry {
namespace {

class ThreadCount : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = get_num_threads(); }
  void TearDown() override { set_num_threads(saved_); }
  int saved_ = 1;
};

TEST_F(ThreadCount, CoversTheRangeExactlyOnce) {
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    for (int64_t n : {0, 1, 7, 1000, 100003}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      parallel_for(0, n, 16, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << i;
    }
  }
}

TEST_F(ThreadCount, RespectsTheGrainSize) {
  set_num_threads(2);
  EXPECT_EQ(parallel_chunks(100, 1000), 1);
  EXPECT_EQ(parallel_chunks(4000, 1000), 2);
  std::atomic<int> calls{0};
  parallel_for(0, 100, 1000, [&](int64_t lo, int64_t hi) {
    EXPECT_EQ(lo, 0);
    EXPECT_EQ(hi, 100);
    ++calls;
  });
  EXPECT_EQ(calls.load(), 1);
}

TEST_F(ThreadCount, NestedRegionsRunInline) {
  set_num_threads(2);
  std::atomic<int64_t> total{0};
  parallel_for(0, 4, 1, [&](int64_t lo, int64_t hi) {
    EXPECT_TRUE(in_parallel_region());
    for (int64_t i = lo; i < hi; ++i) {
      parallel_for(0, 100, 1, [&](int64_t a, int64_t b) { total += b - a; });
    }
  });
  EXPECT_EQ(total.load(), 400);
  EXPECT_FALSE(in_parallel_region());
}

// A ThreadCapGuard lowers the chunks of regions started on its own thread only, nests by taking
// the smaller cap, and ends with its scope; a cap below 1 is refused.
TEST_F(ThreadCount, ThreadCapGuardCapsRegionsOnItsThread) {
  set_num_threads(3);
  EXPECT_EQ(region_threads(), 3);
  {
    const ThreadCapGuard cap(2);
    EXPECT_EQ(region_threads(), 2);
    EXPECT_EQ(parallel_chunks(100, 1), 2);
    {
      const ThreadCapGuard looser(5);  // cannot raise it
      EXPECT_EQ(parallel_chunks(100, 1), 2);
      const ThreadCapGuard tighter(1);
      EXPECT_EQ(parallel_chunks(100, 1), 1);
      std::atomic<int> calls{0};
      parallel_for(0, 100, 1, [&](int64_t lo, int64_t hi) {
        EXPECT_EQ(hi - lo, 100);  // one chunk, inline
        ++calls;
      });
      EXPECT_EQ(calls.load(), 1);
    }
    EXPECT_EQ(parallel_chunks(100, 1), 2);
    int other = 0;
    std::thread([&] { other = parallel_chunks(100, 1); }).join();
    EXPECT_EQ(other, 3);  // another thread is not capped
  }
  EXPECT_EQ(parallel_chunks(100, 1), 3);
  EXPECT_THROW(ThreadCapGuard(0), Error);
}

TEST_F(ThreadCount, ManyCallersAtOnce) {
  set_num_threads(2);
  std::atomic<int64_t> total{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&] {
      for (int r = 0; r < 200; ++r) {
        parallel_for(0, 1000, 10, [&](int64_t lo, int64_t hi) { total += hi - lo; });
      }
    });
  }
  for (auto& c : callers) c.join();
  EXPECT_EQ(total.load(), 4 * 200 * 1000);
}

TEST_F(ThreadCount, RethrowsTheFirstException) {
  set_num_threads(2);
  std::atomic<int> ran{0};
  EXPECT_THROW(parallel_for(0, 1000, 1,
                            [&](int64_t lo, int64_t) {
                              ++ran;
                              if (lo == 0) throw std::runtime_error("chunk failed");
                            }),
               std::runtime_error);
  EXPECT_EQ(ran.load(), 2);
  // The pool still works afterwards.
  std::atomic<int64_t> total{0};
  parallel_for(0, 1000, 1, [&](int64_t lo, int64_t hi) { total += hi - lo; });
  EXPECT_EQ(total.load(), 1000);
}

TEST_F(ThreadCount, SetNumThreads) {
  set_num_threads(3);
  EXPECT_EQ(get_num_threads(), 3);
  EXPECT_EQ(parallel_chunks(1 << 20, 1), 3);
  EXPECT_THROW(set_num_threads(0), Error);
}

}  // namespace
}  // namespace ferry
