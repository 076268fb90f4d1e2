// Memory overlap: internal overlap of views and as_strided layouts, and the overlap status of
// pairs of tensors, including aliases that share memory without sharing a Storage.
#include <gtest/gtest.h>

#include "ferry/ferry.h"
#include "ferry/iter/memory_overlap.h"
#include "ferry/iter/stride_order.h"

namespace ferry {
namespace {

using V = std::vector<int64_t>;

TEST(MemoryOverlap, InternalOverlap) {
  Tensor x = empty({4, 6});
  EXPECT_EQ(has_internal_overlap(x), MemOverlap::No);
  EXPECT_EQ(has_internal_overlap(x.t()), MemOverlap::No);
  EXPECT_EQ(has_internal_overlap(x.slice(1, 0, 6, 2)), MemOverlap::No);
  EXPECT_EQ(has_internal_overlap(empty({4, 1}).expand({4, 3})), MemOverlap::Yes);
  EXPECT_EQ(has_internal_overlap(empty({1}).expand({0})), MemOverlap::No);
  EXPECT_EQ(has_internal_overlap(x.as_strided({2, 2}, {1, 1})), MemOverlap::Yes);
  // Offsets {0, 2, 4} + {0, 3}: all distinct, but not provably so by the cheap test.
  EXPECT_EQ(has_internal_overlap(x.as_strided({3, 2}, {2, 3})), MemOverlap::TooHard);
  EXPECT_EQ(has_internal_overlap(x.as_strided({2, 3}, {3, 2})), MemOverlap::TooHard);
  EXPECT_EQ(has_internal_overlap(x.as_strided({2, 2}, {5, 2})), MemOverlap::No);
}

TEST(MemoryOverlap, Status) {
  Tensor x = empty({10});
  EXPECT_EQ(get_overlap_status(x, x), MemOverlapStatus::Full);
  EXPECT_EQ(get_overlap_status(x, x.alias()), MemOverlapStatus::Full);
  EXPECT_EQ(get_overlap_status(x.slice(0, 0, 5), x.slice(0, 5, 10)), MemOverlapStatus::No);
  EXPECT_EQ(get_overlap_status(x.slice(0, 0, 6), x.slice(0, 5, 10)), MemOverlapStatus::Partial);
  EXPECT_EQ(get_overlap_status(x.slice(0, 1, 10), x.slice(0, 0, 9)), MemOverlapStatus::Partial);
  // Same first byte, other order: partial.
  Tensor sq = empty({3, 3});
  EXPECT_EQ(get_overlap_status(sq, sq.t()), MemOverlapStatus::Partial);
  // Interleaved columns never share an element, but their ranges do: reported as partial.
  Tensor m = empty({4, 8});
  EXPECT_EQ(get_overlap_status(m.slice(1, 0, 8, 2), m.slice(1, 1, 8, 2)),
            MemOverlapStatus::Partial);
  // Empty tensors overlap nothing.
  EXPECT_EQ(get_overlap_status(x.slice(0, 3, 3), x), MemOverlapStatus::No);
}

TEST(MemoryOverlap, SeesAliasesAcrossStorages) {
  float buffer[8] = {};
  Tensor a = from_blob(buffer, {8});
  Tensor b = from_blob(buffer, {8});
  Tensor c = from_blob(buffer + 2, {4});
  Tensor i = from_blob(buffer, {8}, kInt32);
  EXPECT_FALSE(a.is_alias_of(b));
  EXPECT_EQ(get_overlap_status(a, b), MemOverlapStatus::Full);
  EXPECT_EQ(get_overlap_status(a, c), MemOverlapStatus::Partial);
  EXPECT_EQ(get_overlap_status(a, i), MemOverlapStatus::Full);  // same bytes, same order
  Tensor h = from_blob(buffer, {8}, kHalf);
  EXPECT_EQ(get_overlap_status(a, h), MemOverlapStatus::Partial);
  Tensor elsewhere = from_blob(buffer, {8}, TensorOptions().device(Device("sim:0")));
  EXPECT_EQ(get_overlap_status(a, elsewhere), MemOverlapStatus::No);
}

TEST(StrideOrder, InferDenseStrides) {
  // Transposed and sliced: dense strides keep the transposition.
  Tensor t = empty({8, 4}).t().slice(1, 0, 8, 2);  // (4, 4) with strides (1, 8)
  EXPECT_EQ(IntArrayRef(infer_dense_strides(t.sizes(), t.strides())).vec(), (V{1, 4}));
  // Channels-last with a sliced width.
  Tensor cl = empty({2, 3, 4, 6}, TensorOptions().memory_format(MemoryFormat::ChannelsLast))
                  .slice(3, 0, 6, 2);
  EXPECT_EQ(IntArrayRef(infer_dense_strides(cl.sizes(), cl.strides())).vec(), (V{36, 1, 9, 3}));
  // Broadcast dimensions have no place: row-major order among the ambiguous ones.
  Tensor e = empty({3, 1}).expand({3, 5});
  EXPECT_EQ(IntArrayRef(infer_dense_strides(e.sizes(), e.strides())).vec(), (V{5, 1}));
  EXPECT_EQ(IntArrayRef(infer_dense_strides({}, {})).vec(), V{});
}

}  // namespace
}  // namespace ferry
