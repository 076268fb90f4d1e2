// The pinned host allocator: size classes, reuse, the record_event rules, statistics,
// Tensor::pin_memory and is_pinned.
#include <gtest/gtest.h>

#include "ferry/ferry.h"
#include "ferry/memory/memory_resource.h"
#include "ferry/memory/pinned_allocator.h"
#include "tests/memory/memory_fixture.h"

namespace ferry::testing {
namespace {

Tensor pinned_floats(int64_t n) { return empty({n}, TensorOptions(kFloat).pinned_memory(true)); }

using PinnedAllocatorTest = MemoryTest;

TEST_F(PinnedAllocatorTest, SizeClassesArePowersOfTwoFrom512) {
  EXPECT_EQ(memory::pinned_size_class(0), 512u);
  EXPECT_EQ(memory::pinned_size_class(1), 512u);
  EXPECT_EQ(memory::pinned_size_class(512), 512u);
  EXPECT_EQ(memory::pinned_size_class(513), 1024u);
  EXPECT_EQ(memory::pinned_size_class(4096), 4096u);
  EXPECT_EQ(memory::pinned_size_class(4097), 8192u);
}

TEST_F(PinnedAllocatorTest, ReusesFreedBlocksOfTheSameClass) {
  const memory::PinnedStats before = memory::pinned_stats();
  void* first = nullptr;
  {
    Tensor h = pinned_floats(1000);  // 4000 bytes: the 4 KiB class
    EXPECT_TRUE(h.is_pinned());
    first = h.data_ptr();
    const memory::PinnedStats st = memory::pinned_stats();
    EXPECT_EQ(st.allocation.current, before.allocation.current + 1);
    EXPECT_EQ(st.allocated_bytes.current, before.allocated_bytes.current + 4096);
    EXPECT_EQ(st.requested_bytes.current, before.requested_bytes.current + 4000);
  }
  {
    Tensor h = pinned_floats(1024);  // same class
    EXPECT_EQ(h.data_ptr(), first);
    Tensor other = pinned_floats(1025);  // the next class
    EXPECT_NE(other.data_ptr(), first);
  }
  const memory::PinnedStats st = memory::pinned_stats();
  EXPECT_EQ(st.num_cache_hits, before.num_cache_hits + 1);
  EXPECT_EQ(st.num_host_alloc, before.num_host_alloc + 2);
  EXPECT_EQ(st.allocation.current, before.allocation.current);
  EXPECT_EQ(st.segment.current, before.segment.current + 2);

  memory::pinned_empty_cache();
  const memory::PinnedStats emptied = memory::pinned_stats();
  EXPECT_EQ(emptied.segment.current, 0);
  EXPECT_EQ(emptied.reserved_bytes.current, 0);
}

TEST_F(PinnedAllocatorTest, RecordedBlocksWaitForTheirStreams) {
  const Stream copy_stream = get_stream_from_pool(kSim0);
  StreamGate gate(copy_stream);
  void* first = nullptr;
  {
    Tensor h = pinned_floats(256);
    first = h.data_ptr();
    EXPECT_TRUE(memory::pinned_record_event(h.storage(), copy_stream));
  }
  EXPECT_EQ(memory::pinned_stats().pending_events, 1);
  {
    Tensor h = pinned_floats(256);
    EXPECT_NE(h.data_ptr(), first) << "reused while an asynchronous copy may still read it";
  }
  gate.open_and_wait();
  Tensor h = pinned_floats(256);
  EXPECT_EQ(h.data_ptr(), first);
  EXPECT_EQ(memory::pinned_stats().pending_events, 0);
}

TEST_F(PinnedAllocatorTest, RecordStreamOnAPinnedTensorRecordsAnEvent) {
  const Stream copy_stream = get_stream_from_pool(kSim0);
  StreamGate gate(copy_stream);
  void* first = nullptr;
  {
    Tensor h = pinned_floats(256);
    first = h.data_ptr();
    h.slice(0, 8).record_stream(copy_stream);                      // through a view
    EXPECT_TRUE(memory::pinned_record_event(first, copy_stream));  // by address: same block
  }
  EXPECT_NE(pinned_floats(256).data_ptr(), first);
  gate.open_and_wait();
  EXPECT_EQ(pinned_floats(256).data_ptr(), first);
}

TEST_F(PinnedAllocatorTest, BlocksAreFoundFromTheirStoragesAndHooksHearOfTheirRelease) {
  EXPECT_FALSE(memory::pinned_block_of(empty({16}).storage()).has_value());
  EXPECT_FALSE(memory::pinned_block_of(Storage()).has_value());
  Tensor pinned = empty({1000}, TensorOptions().pinned_memory(true));
  const auto block = memory::pinned_block_of(pinned.storage());
  ASSERT_TRUE(block.has_value());
  EXPECT_EQ(block->ptr, pinned.data_ptr());
  EXPECT_EQ(block->size, memory::pinned_size_class(4000));
  Storage view = memory::pinned_view_storage(pinned.storage(), 512, 256);
  const auto of_view = memory::pinned_block_of(view);
  ASSERT_TRUE(of_view.has_value());
  EXPECT_EQ(of_view->ptr, block->ptr);

  memory::pinned_empty_cache();  // what earlier tests left cached
  std::vector<void*> released;
  const uint64_t hook = memory::add_pinned_release_hook(
      [&](const memory::PinnedBlockRange& b) { released.push_back(b.ptr); });
  memory::pinned_empty_cache();
  EXPECT_TRUE(released.empty()) << "a block in use is never handed back";
  pinned = Tensor();
  EXPECT_TRUE(released.empty()) << "a freed block stays cached until pinned_empty_cache";
  memory::pinned_empty_cache();
  EXPECT_TRUE(released.empty()) << "the view still holds the block";
  view = Storage();
  memory::pinned_empty_cache();
  EXPECT_EQ(released, std::vector<void*>{block->ptr});
  memory::remove_pinned_release_hook(hook);
  empty({1000}, TensorOptions().pinned_memory(true));
  memory::pinned_empty_cache();
  EXPECT_EQ(released.size(), 1u) << "a removed hook is not called";
}

TEST_F(PinnedAllocatorTest, RecordEventIgnoresMemoryItDoesNotOwn) {
  Tensor pageable = empty({16});
  const Stream s = get_stream_from_pool(kSim0);
  EXPECT_FALSE(memory::pinned_record_event(pageable.storage(), s));
  EXPECT_FALSE(memory::pinned_record_event(pageable.data_ptr(), s));
  EXPECT_FALSE(memory::pinned_record_event(static_cast<const void*>(nullptr), s));
  Tensor h = pinned_floats(64);
  EXPECT_FALSE(memory::pinned_record_event(static_cast<char*>(h.data_ptr()) + 4, s))
      << "only a block's start address names it";
  EXPECT_TRUE(memory::pinned_record_event(h.storage(), Stream()));  // CPU: nothing to wait for
}

TEST_F(PinnedAllocatorTest, IsPinnedAsksTheBackends) {
  EXPECT_FALSE(empty({16}).is_pinned());
  EXPECT_FALSE(empty({16}, kSim0).is_pinned());
  EXPECT_TRUE(pinned_floats(16).is_pinned());
  EXPECT_TRUE(pinned_floats(16).slice(0, 4).is_pinned());
  EXPECT_TRUE(pinned_floats(0).is_pinned()) << "even empty pinned tensors get a block";
  void* raw = pinned_malloc(DeviceType::Sim, 100);
  EXPECT_TRUE(is_pinned(raw));
  pinned_free(DeviceType::Sim, raw);
}

TEST_F(PinnedAllocatorTest, PinMemoryCopiesIntoPinnedMemory) {
  Tensor src = arange(1000, kFloat);
  Tensor h = src.pin_memory();
  EXPECT_TRUE(h.is_pinned());
  EXPECT_FALSE(src.is_pinned());
  EXPECT_NE(h.data_ptr(), src.data_ptr());
  EXPECT_EQ(h.sizes().vec(), src.sizes().vec());
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(h.data_ptr<float>()[i], static_cast<float>(i));
  EXPECT_TRUE(h.pin_memory().is_same(h)) << "pinning pinned memory should return the tensor";
  // A transposed (dense) layout is kept.
  Tensor t = src.view({10, 100}).t();
  Tensor ht = t.pin_memory();
  EXPECT_EQ(ht.strides().vec(), t.strides().vec());
  EXPECT_THROW(empty({4}, kSim0).pin_memory(), DeviceError);
}

}  // namespace
}  // namespace ferry::testing
