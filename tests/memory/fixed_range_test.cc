// FixedRangeResource over adopted sim memory, through the MemoryResource interface: best fit and
// splitting, stream-ordered reuse (a block recorded on another stream is not reused before that
// stream's work is done; another stream's free block is reused only after waiting for it), and
// random allocate/free sequences checked against a model of the range after every step.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include "ferry/ferry.h"
#include "ferry/memory/fixed_range_resource.h"
#include "tests/memory/memory_fixture.h"
#include "tests/support/random.h"

namespace ferry::testing {
namespace {

using memory::FixedRangeResource;

// A range of sim:0 memory taken straight from the backend, freed after the resource is gone.
class FixedRangeTest : public MemoryTest {
 protected:
  void SetUp() override {
    MemoryTest::SetUp();
    memory_ = get_backend(DeviceType::Sim).malloc(0, kRangeBytes);
    range_.emplace(kSim0, memory_, kRangeBytes, "range 'test'");
    base_ = static_cast<char*>(memory_);
  }
  void TearDown() override {
    EXPECT_NO_THROW(range_->check_invariants());
    EXPECT_EQ(range_->stats().allocation.current, 0) << "a test leaked a block of the range";
    range_.reset();
    get_backend(DeviceType::Sim).free(0, memory_);
    MemoryTest::TearDown();
  }

  static constexpr size_t kRangeBytes = 8 * kMiB;
  void* memory_ = nullptr;
  char* base_ = nullptr;
  std::optional<FixedRangeResource> range_;
  const Stream a_{kSim0, 3};
  const Stream b_{kSim0, 4};
};

TEST_F(FixedRangeTest, BestFitSplitsAndMerges) {
  FixedRangeResource& r = *range_;
  void* x = r.allocate(kMiB, a_);
  void* y = r.allocate(100, a_);
  void* z = r.allocate(kMiB, a_);
  EXPECT_EQ(x, base_);
  EXPECT_EQ(y, base_ + kMiB);
  EXPECT_EQ(z, base_ + kMiB + 512);
  r.deallocate(x, kMiB, a_);
  EXPECT_EQ(r.allocate(600 * 1024, a_), base_) << "best fit: the 1 MiB hole, not the big rest";
  EXPECT_EQ(r.allocate(400 * 1024, a_), base_ + 600 * 1024) << "the hole's remainder";
  r.check_invariants();
  r.deallocate(base_, 600 * 1024, a_);
  r.deallocate(base_ + 600 * 1024, 400 * 1024, a_);
  r.deallocate(y, 100, a_);
  r.deallocate(z, kMiB, a_);
  EXPECT_EQ(r.blocks().size(), 1u) << "everything merged back";
  EXPECT_EQ(r.stats().largest_free_block, kRangeBytes);
}

TEST_F(FixedRangeTest, ARecordedStreamDelaysReuse) {
  FixedRangeResource& r = *range_;
  StreamGate gate(b_);
  void* p = r.allocate(kMiB, a_);
  EXPECT_TRUE(r.record_stream(p, a_, b_));
  r.deallocate(p, kMiB, a_);
  EXPECT_EQ(r.stats().active_bytes.current, static_cast<int64_t>(kMiB));
  void* q = r.allocate(kMiB, a_);
  EXPECT_NE(q, p) << "reused while " << b_ << " may still use it";
  gate.open_and_wait();
  void* again = r.allocate(kMiB, a_);
  EXPECT_EQ(again, p) << "reusable once the recorded stream is done";
  r.deallocate(q, kMiB, a_);
  r.deallocate(again, kMiB, a_);
}

TEST_F(FixedRangeTest, AnotherStreamsFreeBlockIsReusedOnlyAfterThatStreamIsDone) {
  FixedRangeResource& r = *range_;
  StreamGate gate(a_);
  void* whole = r.allocate(kRangeBytes, a_);
  r.deallocate(whole, kRangeBytes, a_);  // a_'s block: its queued work may still use it
  {
    DelayedOpener opener(gate);
    void* p = r.allocate(kRangeBytes, b_);  // only fits after waiting for a_
    EXPECT_TRUE(a_.query()) << "handed to " << b_ << " while " << a_ << " was still running";
    EXPECT_EQ(p, base_);
    r.deallocate(p, kRangeBytes, b_);
  }
  r.check_invariants();
}

TEST_F(FixedRangeTest, ClosedRangesRefuseAllocations) {
  FixedRangeResource& r = *range_;
  void* p = r.allocate(kMiB, a_);
  EXPECT_THROW(FixedRangeResource::close_all({&r}, "closing"), Error);
  EXPECT_FALSE(r.closed()) << "all or nothing";
  r.deallocate(p, kMiB, a_);
  FixedRangeResource::close_all({&r}, "closing");
  EXPECT_TRUE(r.closed());
  EXPECT_THROW(r.allocate(kMiB, a_), Error);
}

// Random allocations and frees on three streams (with occasional record_stream), checked against
// a model: live blocks lie inside the range, never overlap, are 512-byte aligned, and the stats
// match; an out-of-memory error is raised only when no gap of the model could hold the request.
TEST_F(FixedRangeTest, RandomSequencesMatchAModel) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng = test_rng();
  FixedRangeResource& r = *range_;
  const Stream streams[] = {a_, b_, Stream(kSim0, 5)};
  struct Live {
    size_t requested;
    size_t rounded;
    Stream stream;
  };
  std::map<char*, Live> live;  // by address
  size_t live_bytes = 0;
  const auto largest_gap = [&] {
    size_t largest = 0;
    char* at = base_;
    for (const auto& [p, l] : live) {
      largest = std::max(largest, static_cast<size_t>(p - at));
      at = p + l.rounded;
    }
    return std::max(largest, static_cast<size_t>(base_ + kRangeBytes - at));
  };
  for (int step = 0; step < 3000; ++step) {
    SCOPED_TRACE(step);
    const bool allocate = live.empty() || rng() % 100 < 55;
    const Stream& s = streams[rng() % 3];
    if (allocate) {
      const size_t sizes[] = {1 + rng() % 4096, 1 + rng() % (256 * 1024), 1 + rng() % (2 * kMiB)};
      const size_t n = sizes[rng() % 3];
      const size_t rounded = (n + 511) / 512 * 512;
      try {
        auto* p = static_cast<char*>(r.allocate(n, s));
        ASSERT_EQ(reinterpret_cast<uintptr_t>(p) % 512, 0u);
        ASSERT_GE(p, base_);
        ASSERT_LE(p + rounded, base_ + kRangeBytes);
        auto next = live.lower_bound(p);
        ASSERT_TRUE(next == live.end() || p + rounded <= next->first) << "overlaps the next";
        if (next != live.begin()) {
          const auto prev = std::prev(next);
          ASSERT_LE(prev->first + prev->second.rounded, p) << "overlaps the previous";
        }
        live.emplace(p, Live{n, rounded, s});
        live_bytes += rounded;
      } catch (const OutOfMemoryError&) {
        ASSERT_LT(largest_gap(), rounded) << "out of memory with room for " << n << " bytes";
      }
    } else {
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng() % live.size()));
      if (rng() % 8 == 0) r.record_stream(it->first, it->second.stream, streams[rng() % 3]);
      r.deallocate(it->first, it->second.requested, it->second.stream);
      live_bytes -= it->second.rounded;
      live.erase(it);
    }
    ASSERT_NO_THROW(r.check_invariants());
    ASSERT_EQ(r.stats().allocated_bytes.current, static_cast<int64_t>(live_bytes));
    ASSERT_EQ(r.stats().allocation.current, static_cast<int64_t>(live.size()));
  }
  for (const auto& [p, l] : live) r.deallocate(p, l.requested, l.stream);
  EXPECT_GT(r.stats().num_ooms, 0) << "the sequence never filled the range";
}

}  // namespace
}  // namespace ferry::testing
