// The pinned allocator's large blocks (exact, page-rounded sizes from 1 MiB up), their reuse
// rule and statistics, recorded events on them, and view storages (pinned_view_storage) whose
// events protect the whole block.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ferry/ferry.h"
#include "ferry/memory/pinned_allocator.h"
#include "tests/memory/memory_fixture.h"
#include "tests/support/errors.h"

namespace ferry::testing {
namespace {

using ::testing::HasSubstr;

Tensor pinned_bytes(size_t n) {
  return empty({static_cast<int64_t>(n)}, TensorOptions(kUInt8).pinned_memory(true));
}

using PinnedLargeTest = MemoryTest;

TEST_F(PinnedLargeTest, LargeRequestsGetPageRoundedBlocks) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  EXPECT_EQ(memory::pinned_size_class(kMiB - 1), kMiB);  // still a power of two below 1 MiB
  EXPECT_EQ(memory::pinned_size_class(kMiB), kMiB);
  EXPECT_EQ(memory::pinned_size_class(kMiB + 1), kMiB + page);
  EXPECT_EQ(memory::pinned_size_class((size_t{1} << 30) + 1), (size_t{1} << 30) + page);
  EXPECT_EQ(memory::pinned_size_class(3 * kMiB + 5), 3 * kMiB + page);
}

TEST_F(PinnedLargeTest, StatsShowTheExactSizes) {
  const memory::PinnedStats before = memory::pinned_stats();
  {
    // 64 MiB + 1 byte: a power-of-two class would hand out 128 MiB.
    const Tensor t = pinned_bytes(64 * kMiB + 1);
    const memory::PinnedStats st = memory::pinned_stats();
    EXPECT_EQ(st.large_allocation.current, before.large_allocation.current + 1);
    EXPECT_EQ(st.large_requested_bytes.current - before.large_requested_bytes.current,
              static_cast<int64_t>(64 * kMiB + 1));
    EXPECT_EQ(st.large_allocated_bytes.current - before.large_allocated_bytes.current,
              static_cast<int64_t>(memory::pinned_size_class(64 * kMiB + 1)));
    EXPECT_EQ(st.reserved_bytes.current - before.reserved_bytes.current,
              static_cast<int64_t>(memory::pinned_size_class(64 * kMiB + 1)));
    EXPECT_LT(st.allocated_bytes.current - before.allocated_bytes.current,
              static_cast<int64_t>(65 * kMiB));
  }
  const memory::PinnedStats after = memory::pinned_stats();
  EXPECT_EQ(after.large_allocation.current, before.large_allocation.current);
  EXPECT_EQ(after.large_allocated_bytes.current, before.large_allocated_bytes.current);
  EXPECT_EQ(after.large_allocation.peak, before.large_allocation.current + 1);
}

TEST_F(PinnedLargeTest, CachedLargeBlocksServeRequestsWithinAnEighth) {
  void* first = nullptr;
  { first = pinned_bytes(8 * kMiB).data_ptr(); }
  const memory::PinnedStats before = memory::pinned_stats();
  { EXPECT_EQ(pinned_bytes(8 * kMiB - 512 * 1024).data_ptr(), first) << "1/16 smaller: reused"; }
  { EXPECT_EQ(pinned_bytes(8 * kMiB).data_ptr(), first); }
  { EXPECT_NE(pinned_bytes(4 * kMiB).data_ptr(), first) << "half the block would be wasted"; }
  { EXPECT_NE(pinned_bytes(8 * kMiB + 4096 * 2).data_ptr(), first) << "too small"; }
  { EXPECT_NE(pinned_bytes(512 * 1024).data_ptr(), first) << "small classes never take one"; }
  const memory::PinnedStats st = memory::pinned_stats();
  EXPECT_EQ(st.num_cache_hits, before.num_cache_hits + 2);
  memory::pinned_empty_cache();
  EXPECT_EQ(memory::pinned_stats().reserved_bytes.current, 0);
}

TEST_F(PinnedLargeTest, RecordedLargeBlocksWaitForTheirStreams) {
  const Stream copy_stream = get_stream_from_pool(kSim0);
  StreamGate gate(copy_stream);
  void* first = nullptr;
  {
    const Tensor h = pinned_bytes(2 * kMiB);
    first = h.data_ptr();
    EXPECT_TRUE(memory::pinned_record_event(h.storage(), copy_stream));
  }
  // Held until the end, so that the only cached block of that size is the recorded one.
  const Tensor other = pinned_bytes(2 * kMiB);
  EXPECT_NE(other.data_ptr(), first) << "reused while a copy may read it";
  gate.open_and_wait();
  { EXPECT_EQ(pinned_bytes(2 * kMiB).data_ptr(), first); }
}

TEST_F(PinnedLargeTest, ViewStoragesAreIndependentAndProtectTheBlock) {
  const Stream copy_stream = get_stream_from_pool(kSim0);
  StreamGate gate(copy_stream);
  void* block_address = nullptr;
  Storage inner;
  {
    const Tensor block = pinned_bytes(2 * kMiB);
    block_address = block.data_ptr();
    const Storage view = memory::pinned_view_storage(block.storage(), 4096, 8192);
    EXPECT_EQ(view.data(), static_cast<char*>(block_address) + 4096);
    EXPECT_EQ(view.nbytes(), 8192u);
    EXPECT_FALSE(view.is_alias_of(block.storage()));
    EXPECT_TRUE(is_pinned(view.data(), view.nbytes()));
    inner = memory::pinned_view_storage(view, 100, 50);  // a view of a view: the same block
    EXPECT_EQ(inner.data(), static_cast<char*>(block_address) + 4196);
    EXPECT_THAT(error_of([&] { (void)memory::pinned_view_storage(view, 0, 2 * kMiB + 1); }),
                HasSubstr("to lie inside the pinned block of 2097152 bytes"));
    const Tensor pageable = empty({16}, kUInt8);
    EXPECT_THAT(error_of([&] { (void)memory::pinned_view_storage(pageable.storage(), 0, 4); }),
                HasSubstr("expected a storage of the pinned host allocator"));
  }
  // Only `inner` keeps the block: recording on it protects the whole block.
  EXPECT_TRUE(memory::pinned_record_event(inner, copy_stream));
  EXPECT_EQ(memory::pinned_stats().large_allocation.current, 1);
  inner = Storage();
  EXPECT_EQ(memory::pinned_stats().large_allocation.current, 0);
  const Tensor other = pinned_bytes(2 * kMiB);  // held: the recorded block is the only cached one
  EXPECT_NE(other.data_ptr(), block_address);
  gate.open_and_wait();
  { EXPECT_EQ(pinned_bytes(2 * kMiB).data_ptr(), block_address); }
}

}  // namespace
}  // namespace ferry::testing
