// The memory issue's "shape of the API" example, compiled and run as written, then checked.
#include <gtest/gtest.h>

#include "ferry/ferry.h"
#include "ferry/memory/caching_allocator.h"
#include "tests/memory/memory_fixture.h"

namespace ferry::testing {
namespace {

using MemoryApiExample = MemoryTest;

TEST_F(MemoryApiExample, RunsAsWritten) {
  ferry::Device dev("sim:0");
  ferry::Stream side = ferry::get_stream_from_pool(dev);
  ferry::Tensor t = ferry::empty({1 << 20}, dev);
  t.record_stream(side);
  ferry::memory::Stats st = ferry::memory::stats(dev);  // st.allocated_bytes.current, .peak …
  ferry::memory::empty_cache(dev);
  ferry::Tensor h = ferry::empty({1024}, ferry::kFloat).pin_memory();  // h.is_pinned()

  EXPECT_EQ(st.allocated_bytes.current, int64_t{4} << 20) << "a million floats";
  EXPECT_EQ(st.allocated_bytes.peak, int64_t{4} << 20);
  EXPECT_EQ(st.allocation.current, 1);
  EXPECT_TRUE(h.is_pinned());
  EXPECT_EQ(h.numel(), 1024);
  // empty_cache keeps the live tensor's segment and nothing else.
  const ferry::memory::Stats after = ferry::memory::stats(dev);
  EXPECT_EQ(after.reserved_bytes.current, int64_t{20} << 20);
  EXPECT_EQ(after.allocated_bytes.current, int64_t{4} << 20);
  // Freed with side recorded: the block waits for side, then returns.
  void* const address = t.data_ptr();
  t = ferry::Tensor();
  side.synchronize();
  EXPECT_EQ(ferry::empty({1 << 20}, dev).data_ptr(), address);
}

}  // namespace
}  // namespace ferry::testing
