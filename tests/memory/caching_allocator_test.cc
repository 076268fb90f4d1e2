// The caching device allocator on the sim: rounding and segment sizes, same-stream reuse,
// splitting and merging, max_split_size, empty_cache, statistics, the memory fraction, garbage
// collection, out-of-memory handling and errors from the resource interface.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "ferry/device/guard.h"
#include "ferry/ferry.h"
#include "ferry/memory/caching_allocator.h"
#include "tests/memory/memory_fixture.h"

namespace ferry::testing {
namespace {

using memory::MemoryResource;

using memory::BlockState;

struct Found {
  const memory::SegmentInfo* segment = nullptr;
  const memory::BlockInfo* block = nullptr;
};

Found find(const memory::Snapshot& snap, const void* ptr) {
  for (const auto& seg : snap.segments) {
    for (const auto& b : seg.blocks) {
      if (b.address == ptr) return {&seg, &b};
    }
  }
  return {};
}

bool inside(const void* p, const void* base, size_t size) {
  const auto* c = static_cast<const char*>(p);
  const auto* b = static_cast<const char*>(base);
  return c >= b && c < b + size;
}

using CachingAllocatorTest = MemoryTest;

TEST_F(CachingAllocatorTest, RoundsRequestsAndSizesSegmentsAsPyTorch) {
  struct Case {
    size_t request, block, segment;
    bool large;
  };
  const Case cases[] = {
      {1, 512, 2 * kMiB, false},
      {512, 512, 2 * kMiB, false},
      {513, 1024, 2 * kMiB, false},
      {kMiB, kMiB, 2 * kMiB, false},
      {kMiB + 1, kMiB + 512, 20 * kMiB, true},
      {9 * kMiB + kMiB / 2, 9 * kMiB + kMiB / 2, 20 * kMiB, true},
      {10 * kMiB, 10 * kMiB, 10 * kMiB, true},
      // Rounded to 12 MiB; the 1 MiB - 512 B left is not worth a block of its own.
      {11 * kMiB + 1, 12 * kMiB, 12 * kMiB, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.request);
    Tensor t = device_bytes(c.request);
    const memory::Snapshot snap = memory::snapshot(kSim0);
    const Found f = find(snap, t.data_ptr());
    ASSERT_NE(f.block, nullptr);
    EXPECT_EQ(f.block->size, c.block);
    EXPECT_EQ(f.block->requested_size, c.request);
    EXPECT_EQ(f.block->state, BlockState::kAllocated);
    EXPECT_EQ(f.segment->size, c.segment);
    EXPECT_EQ(f.segment->is_large, c.large);
    EXPECT_EQ(memory::stats(kSim0).allocated_bytes.current, static_cast<int64_t>(c.block));
    t = Tensor();
    memory::empty_cache(kSim0);
  }
}

TEST_F(CachingAllocatorTest, ReusesBlocksOnTheStreamTheyWereFreedOnOnly) {
  const Stream a = get_stream_from_pool(kSim0);
  Stream b = get_stream_from_pool(kSim0);
  if (b == a) b = get_stream_from_pool(kSim0);
  void* first = nullptr;
  {
    StreamGuard guard(a);
    first = device_bytes(4096).data_ptr();
  }
  {
    StreamGuard guard(b);
    Tensor t = device_bytes(4096);
    EXPECT_NE(t.data_ptr(), first) << "a block freed on " << a << " was reused on " << b;
  }
  {
    StreamGuard guard(a);
    Tensor t = device_bytes(4096);
    EXPECT_EQ(t.data_ptr(), first);
  }
  EXPECT_EQ(memory::stats(kSim0).segment.current, 2);
}

TEST_F(CachingAllocatorTest, SplitsBlocksAndMergesFreeNeighbours) {
  Tensor x = device_bytes(1000);
  Tensor y = device_bytes(1000);
  Tensor z = device_bytes(1000);
  auto* base = static_cast<char*>(x.data_ptr());
  EXPECT_EQ(y.data_ptr(), base + 1024);
  EXPECT_EQ(z.data_ptr(), base + 2048);
  const auto blocks = [&] {
    const memory::Snapshot snap = memory::snapshot(kSim0);
    return find(snap, base).segment->blocks;
  };
  ASSERT_EQ(blocks().size(), 4u);  // x, y, z and the rest of the 2 MiB segment
  EXPECT_EQ(blocks()[3].state, BlockState::kFree);
  EXPECT_EQ(blocks()[3].size, 2 * kMiB - 3072);

  y = Tensor();
  ASSERT_EQ(blocks().size(), 4u);
  EXPECT_EQ(blocks()[1].state, BlockState::kFree);
  memory::check_invariants(kSim0);
  x = Tensor();  // merges with y's block
  ASSERT_EQ(blocks().size(), 3u);
  EXPECT_EQ(blocks()[0].size, 2048u);
  EXPECT_EQ(blocks()[0].state, BlockState::kFree);
  memory::check_invariants(kSim0);
  z = Tensor();  // merges with both neighbours: the segment is one free block again
  ASSERT_EQ(blocks().size(), 1u);
  EXPECT_EQ(blocks()[0].size, 2 * kMiB);
  memory::check_invariants(kSim0);
}

TEST_F(CachingAllocatorTest, SplitsLargeBlocksOnlyWhenMoreThanOneMiBRemains) {
  Tensor a = device_bytes(5 * kMiB);  // a 20 MiB segment: 15 MiB remain, split off
  Tensor b = device_bytes(14 * kMiB + kMiB / 2);
  EXPECT_EQ(b.data_ptr(), static_cast<char*>(a.data_ptr()) + 5 * kMiB);
  const memory::Snapshot snap = memory::snapshot(kSim0);
  const Found f = find(snap, b.data_ptr());
  ASSERT_NE(f.block, nullptr);
  EXPECT_EQ(f.block->size, 15 * kMiB) << "a remainder of 512 KiB should stay with the block";
  const memory::Stats st = memory::stats(kSim0);
  EXPECT_EQ(st.allocated_bytes.current, static_cast<int64_t>(20 * kMiB));
  EXPECT_EQ(st.requested_bytes.current, static_cast<int64_t>(19 * kMiB + kMiB / 2));
  EXPECT_EQ(st.segment.current, 1);
}

TEST_F(CachingAllocatorTest, MaxSplitSizeKeepsOversizeBlocksWhole) {
  // Without a limit, a small request splits a cached 64 MiB block.
  void* p64 = device_bytes(64 * kMiB).data_ptr();
  EXPECT_EQ(device_bytes(5 * kMiB).data_ptr(), p64);
  memory::empty_cache(kSim0);

  memory::set_alloc_conf("max_split_size_mb:40");
  EXPECT_EQ(memory::stats(kSim0).max_split_size, 40 * kMiB);
  {
    Tensor t = device_bytes(64 * kMiB);
    p64 = t.data_ptr();
    const memory::Stats st = memory::stats(kSim0);
    EXPECT_EQ(st.oversize_allocations.current, 1);
    EXPECT_EQ(st.oversize_segments.current, 1);
  }
  EXPECT_EQ(memory::stats(kSim0).oversize_allocations.current, 0);
  {
    Tensor t = device_bytes(5 * kMiB);  // a small request never takes an oversize block
    EXPECT_FALSE(inside(t.data_ptr(), p64, 64 * kMiB));
  }
  {
    Tensor t = device_bytes(42 * kMiB);  // 64 MiB would leave more than 20 MiB of slack
    EXPECT_FALSE(inside(t.data_ptr(), p64, 64 * kMiB));
  }
  {
    Tensor t = device_bytes(45 * kMiB);  // within 20 MiB: takes the block, whole
    EXPECT_EQ(t.data_ptr(), p64);
    const memory::Snapshot snap = memory::snapshot(kSim0);
    const Found f = find(snap, p64);
    ASSERT_NE(f.block, nullptr);
    EXPECT_EQ(f.block->size, 64 * kMiB);
    EXPECT_EQ(f.segment->blocks.size(), 1u);
  }
  memory::check_invariants(kSim0);
}

TEST_F(CachingAllocatorTest, EmptyCacheReturnsEntirelyFreeSegments) {
  ASSERT_EQ(memory::stats(kSim0).reserved_bytes.current, 0);
  Tensor kept = device_bytes(30 * kMiB);
  device_bytes(3 * kMiB);
  device_bytes(100);
  memory::Stats st = memory::stats(kSim0);
  EXPECT_EQ(st.reserved_bytes.current, static_cast<int64_t>(52 * kMiB));
  EXPECT_EQ(st.segment.current, 3);
  const size_t free_before = memory_info(kSim0).free;

  memory::empty_cache(kSim0);
  st = memory::stats(kSim0);
  EXPECT_EQ(st.reserved_bytes.current, static_cast<int64_t>(30 * kMiB));
  EXPECT_EQ(st.segment.current, 1);
  EXPECT_EQ(st.num_device_free, 2);
  EXPECT_EQ(memory_info(kSim0).free, free_before + 22 * kMiB);
  EXPECT_EQ(st.allocated_bytes.current, static_cast<int64_t>(30 * kMiB));
}

TEST_F(CachingAllocatorTest, StatsTrackCurrentPeakAndTotals) {
  memory::reset_accumulated_stats(kSim0);
  memory::reset_peak_stats(kSim0);
  {
    Tensor a = device_bytes(1000);
    Tensor b = device_bytes(3 * kMiB);
    const memory::Stats st = memory::stats(kSim0);
    EXPECT_EQ(st.allocation.current, 2);
    EXPECT_EQ(st.allocated_bytes.current, static_cast<int64_t>(1024 + 3 * kMiB));
    EXPECT_EQ(st.requested_bytes.current, static_cast<int64_t>(1000 + 3 * kMiB));
    EXPECT_EQ(st.active.current, 2);
    EXPECT_EQ(st.active_bytes.current, static_cast<int64_t>(1024 + 3 * kMiB));
    EXPECT_EQ(st.segment.current, 2);
    EXPECT_EQ(st.reserved_bytes.current, static_cast<int64_t>(22 * kMiB));
    EXPECT_EQ(st.num_device_alloc, 2);
  }
  memory::Stats st = memory::stats(kSim0);
  EXPECT_EQ(st.allocation.current, 0);
  EXPECT_EQ(st.allocation.peak, 2);
  EXPECT_EQ(st.allocation.allocated, 2);
  EXPECT_EQ(st.allocation.freed, 2);
  EXPECT_EQ(st.allocated_bytes.peak, static_cast<int64_t>(1024 + 3 * kMiB));
  EXPECT_EQ(st.reserved_bytes.current, static_cast<int64_t>(22 * kMiB));  // cached
  memory::reset_peak_stats(kSim0);
  st = memory::stats(kSim0);
  EXPECT_EQ(st.allocation.peak, 0);
  EXPECT_EQ(st.reserved_bytes.peak, static_cast<int64_t>(22 * kMiB));
}

TEST_F(CachingAllocatorTest, MemoryFractionCapsReservedMemory) {
  memory::set_memory_fraction(0.01, kSim1);  // 4 GiB * 0.01: about 41 MiB
  EXPECT_EQ(memory::memory_fraction(kSim1), 0.01);
  Tensor a = device_bytes(30 * kMiB, kSim1);
  const memory::Stats before = memory::stats(kSim1);
  try {
    device_bytes(30 * kMiB, kSim1);
    ADD_FAILURE() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("sim:1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("30.00 MiB"), std::string::npos) << msg;
    EXPECT_NE(msg.find("memory fraction of 0.01"), std::string::npos) << msg;
  }
  memory::Stats after = memory::stats(kSim1);
  EXPECT_EQ(after.num_ooms, before.num_ooms + 1);
  EXPECT_EQ(after.allocated_bytes.current, before.allocated_bytes.current);
  EXPECT_EQ(after.reserved_bytes.current, before.reserved_bytes.current);

  // Once `a` is free, the retry gives its segment back and the larger request fits.
  a = Tensor();
  Tensor b = device_bytes(35 * kMiB, kSim1);
  after = memory::stats(kSim1);
  EXPECT_EQ(after.num_alloc_retries, before.num_alloc_retries + 2);
  EXPECT_EQ(after.reserved_bytes.current, static_cast<int64_t>(36 * kMiB));

  EXPECT_THROW(memory::set_memory_fraction(0.0, kSim1), Error);
  EXPECT_THROW(memory::set_memory_fraction(1.5, kSim1), Error);
  EXPECT_THROW(memory::set_memory_fraction(0.5, Device("cpu")), DeviceError);
}

TEST_F(CachingAllocatorTest, GarbageCollectionReleasesLeastRecentlyUsedSegments) {
  memory::set_memory_fraction(0.05, kSim1);  // about 205 MiB; the threshold below makes it 102
  memory::set_alloc_conf("garbage_collection_threshold:0.5");
  const Stream a = Stream(kSim1, 1), b = Stream(kSim1, 2), c = Stream(kSim1, 3);
  for (const Stream& s : {a, b}) {
    StreamGuard guard(s);
    device_bytes(40 * kMiB, kSim1);  // cached on its stream
  }
  {
    StreamGuard guard(c);
    Tensor t = device_bytes(40 * kMiB, kSim1);  // 120 MiB reserved would pass the threshold
    const memory::Stats st = memory::stats(kSim1);
    EXPECT_EQ(st.num_gc_frees, 1);
    EXPECT_EQ(st.reserved_bytes.current, static_cast<int64_t>(80 * kMiB));
    const memory::Snapshot snap = memory::snapshot(kSim1);
    ASSERT_EQ(snap.segments.size(), 2u);
    for (const auto& seg : snap.segments) {
      EXPECT_NE(seg.stream, a) << "the least recently used segment (stream 1) should be gone";
    }
  }
}

TEST_F(CachingAllocatorTest, ResourceInterfaceRejectsBadDeallocations) {
  MemoryResource* r = memory::caching_allocator();
  const Stream s = current_stream(kSim0);
  void* p = r->allocate(1000, s);
  EXPECT_EQ(r->allocate(0, s), nullptr);
  EXPECT_THROW(r->deallocate(p, 999, s), Error);  // not the allocated size: stays allocated
  EXPECT_EQ(memory::stats(kSim0).allocation.current, 1);
  r->deallocate(p, 1000, s);
  EXPECT_THROW(r->deallocate(p, 1000, s), Error);  // double free
  EXPECT_THROW(r->allocate(16, Stream()), DeviceError);
  EXPECT_THROW(r->allocate(size_t{1} << 63, s), OutOfMemoryError);
}

// ---- out of memory, on a sim device with 64 MiB -------------------------------------------

class SmallDeviceTest : public MemoryTest {
 protected:
  sim::SimConfig config() const override {
    sim::SimConfig c = default_sim_config();
    c.memory = 64 * kMiB;
    return c;
  }
};

TEST_F(SmallDeviceTest, OutOfMemoryErrorSaysWhatWasAskedAndWhatIsHeld) {
  Tensor held = device_bytes(20 * kMiB);
  device_bytes(3 * kMiB);  // leaves a 20 MiB segment cached
  const memory::Stats before = memory::stats(kSim0);
  try {
    device_bytes(100 * kMiB);
    ADD_FAILURE() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    const std::string msg = e.what();
    for (const char* part :
         {"sim:0: out of memory", "tried to allocate 100.00 MiB (104857600 bytes)",
          "64.00 MiB in total", "is free", "reserved", "20.00 MiB is allocated",
          "largest free cached block"}) {
      EXPECT_NE(msg.find(part), std::string::npos) << "missing '" << part << "' in: " << msg;
    }
  }
  const memory::Stats after = memory::stats(kSim0);
  EXPECT_EQ(after.num_ooms, before.num_ooms + 1);
  EXPECT_EQ(after.allocation.current, 1);
  EXPECT_EQ(after.allocated_bytes.current, before.allocated_bytes.current);
  EXPECT_EQ(after.reserved_bytes.current, static_cast<int64_t>(20 * kMiB))
      << "the cached segment should have been released before giving up";
  held = Tensor();
  memory::empty_cache(kSim0);
  EXPECT_EQ(memory::stats(kSim0).reserved_bytes.current, 0);
  EXPECT_EQ(memory_info(kSim0).free, 64 * kMiB) << "nothing may leak after an OOM";
}

TEST_F(SmallDeviceTest, RetriesAfterReleasingSegmentsCachedForOtherStreams) {
  {
    StreamGuard guard(Stream(kSim0, 1));
    device_bytes(40 * kMiB);
  }
  StreamGuard guard(Stream(kSim0, 2));
  Tensor t = device_bytes(40 * kMiB);
  const memory::Stats st = memory::stats(kSim0);
  EXPECT_EQ(st.num_alloc_retries, 1);
  EXPECT_EQ(st.num_ooms, 0);
  EXPECT_EQ(st.reserved_bytes.current, static_cast<int64_t>(40 * kMiB));
}

TEST_F(SmallDeviceTest, WaitsForRecordedStreamsBeforeGivingUp) {
  const Stream side(kSim0, 3);
  StreamGate gate(side);
  void* p = nullptr;
  {
    Tensor t = device_bytes(40 * kMiB);
    p = t.data_ptr();
    t.record_stream(side);
  }
  EXPECT_EQ(memory::stats(kSim0).active_bytes.current, static_cast<int64_t>(40 * kMiB));
  std::thread opener([&gate] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    gate.open();
  });
  Tensor t = device_bytes(40 * kMiB);  // only fits once the recorded stream is done
  opener.join();
  EXPECT_EQ(t.data_ptr(), p);
  EXPECT_EQ(memory::stats(kSim0).num_alloc_retries, 1);
}

}  // namespace
}  // namespace ferry::testing
