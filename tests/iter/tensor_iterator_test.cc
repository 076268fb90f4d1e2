// TensorIterator: shapes and byte strides after broadcasting, reordering and coalescing against
// hand-computed expectations; the fast path; output allocation; the build's checks and their
// messages; and the postconditions on random layouts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "ferry/core/element_walk.h"
#include "ferry/ferry.h"
#include "ferry/iter/parallel.h"
#include "ferry/iter/tensor_iterator.h"
#include "tests/support/random.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;
using V = std::vector<int64_t>;

TensorIterator copy_iter(const Tensor& dst, const Tensor& src, IterBuildTrace* trace = nullptr) {
  return TensorIteratorConfig()
      .add_output(dst)
      .add_input(src)
      .resize_outputs(false)
      .check_all_same_dtype(false)
      .check_mem_overlap(false)
      .trace(trace)
      .build();
}

TEST(TensorIterator, SameShapeContiguousIsOneRun) {
  Tensor dst = empty({2, 3, 4});
  Tensor src = empty({2, 3, 4}, kHalf);
  TensorIterator it = copy_iter(dst, src);
  EXPECT_EQ(it.shape().vec(), V{24});
  EXPECT_EQ(it.strides(0).vec(), V{4});
  EXPECT_EQ(it.strides(1).vec(), V{2});
  EXPECT_EQ(it.numel(), 24);
  EXPECT_TRUE(it.is_contiguous());
  EXPECT_EQ(it.data_ptr(0), dst.data_ptr());
  EXPECT_EQ(it.dtype(1), kHalf);
}

TEST(TensorIterator, TracedBuildGivesTheFastPathsResult) {
  Tensor dst = empty({2, 3, 4});
  Tensor src = empty({2, 3, 4});
  IterBuildTrace trace;
  TensorIterator it = copy_iter(dst, src, &trace);
  EXPECT_EQ(it.shape().vec(), V{24});
  EXPECT_EQ(it.strides(1).vec(), V{4});
  EXPECT_EQ(IntArrayRef(trace.broadcast_shape).vec(), (V{2, 3, 4}));
  EXPECT_EQ(IntArrayRef(trace.broadcast_strides[0]).vec(), (V{48, 16, 4}));
  EXPECT_EQ(IntArrayRef(trace.perm).vec(), (V{2, 1, 0}));
  EXPECT_EQ(IntArrayRef(trace.reordered_shape).vec(), (V{4, 3, 2}));
  EXPECT_EQ(IntArrayRef(trace.reordered_strides[1]).vec(), (V{4, 16, 48}));
}

TEST(TensorIterator, DenseSameStridesIsOneRunInMemoryOrder) {
  Tensor dst = empty({2, 3, 4}).permute({2, 0, 1});
  Tensor src = empty({2, 3, 4}, kInt64).permute({2, 0, 1});
  TensorIterator it = copy_iter(dst, src);
  EXPECT_EQ(it.shape().vec(), V{24});
  EXPECT_EQ(it.strides(0).vec(), V{4});
  EXPECT_EQ(it.strides(1).vec(), V{8});
}

TEST(TensorIterator, TransposeKeepsBothDimensions) {
  Tensor dst = empty({4, 5});
  Tensor src = empty({5, 4}).t();  // element strides (1, 4)
  TensorIterator it = copy_iter(dst, src);
  // Ordered by dst: dim 1 (4 bytes) first. dst merges, src (stride 20 then 4) does not.
  EXPECT_EQ(it.shape().vec(), (V{5, 4}));
  EXPECT_EQ(it.strides(0).vec(), (V{4, 20}));
  EXPECT_EQ(it.strides(1).vec(), (V{16, 4}));
  EXPECT_FALSE(it.is_contiguous());
  EXPECT_FALSE(it.has_contiguous_first_dim());
}

TEST(TensorIterator, NchwToNhwc) {
  Tensor dst = empty({2, 3, 4, 5}, TensorOptions().memory_format(MemoryFormat::ChannelsLast));
  Tensor src = empty({2, 3, 4, 5});
  IterBuildTrace trace;
  TensorIterator it = copy_iter(dst, src, &trace);
  // Bytes: dst (240, 4, 60, 12), src (240, 80, 20, 4). Reordered by dst: C, W, H, N.
  EXPECT_EQ(IntArrayRef(trace.perm).vec(), (V{1, 3, 2, 0}));
  EXPECT_EQ(IntArrayRef(trace.reordered_shape).vec(), (V{3, 5, 4, 2}));
  EXPECT_EQ(IntArrayRef(trace.reordered_strides[0]).vec(), (V{4, 12, 60, 240}));
  EXPECT_EQ(IntArrayRef(trace.reordered_strides[1]).vec(), (V{80, 4, 20, 240}));
  // W and H merge in both; C and N stay apart for src.
  EXPECT_EQ(it.shape().vec(), (V{3, 20, 2}));
  EXPECT_EQ(it.strides(0).vec(), (V{4, 12, 240}));
  EXPECT_EQ(it.strides(1).vec(), (V{80, 4, 240}));
}

TEST(TensorIterator, SliceWithStepMergesIntoOneStridedRun) {
  Tensor dst = empty({4, 4});
  Tensor src = empty({4, 8}).slice(1, 0, 8, 2);  // element strides (8, 2)
  TensorIterator it = copy_iter(dst, src);
  EXPECT_EQ(it.shape().vec(), V{16});
  EXPECT_EQ(it.strides(0).vec(), V{4});
  EXPECT_EQ(it.strides(1).vec(), V{8});
  EXPECT_FALSE(it.is_contiguous());
}

TEST(TensorIterator, BroadcastRowAndColumn) {
  Tensor dst = empty({3, 4});
  Tensor row_src = empty({4}), col_src = empty({3, 1}), scalar_src = empty({});
  TensorIterator row = copy_iter(dst, row_src);
  EXPECT_EQ(row.shape().vec(), (V{4, 3}));
  EXPECT_EQ(row.strides(0).vec(), (V{4, 16}));
  EXPECT_EQ(row.strides(1).vec(), (V{4, 0}));
  TensorIterator col = copy_iter(dst, col_src);
  EXPECT_EQ(col.shape().vec(), (V{4, 3}));
  EXPECT_EQ(col.strides(1).vec(), (V{0, 4}));
  TensorIterator scalar = copy_iter(dst, scalar_src);
  EXPECT_EQ(scalar.shape().vec(), V{12});
  EXPECT_EQ(scalar.strides(1).vec(), V{0});
}

TEST(TensorIterator, SizeOneDimensionsDisappear) {
  Tensor dst = empty({2, 1, 3, 1});
  Tensor src = empty({3, 2}).t().unsqueeze(1).unsqueeze(3);  // (2,1,3,1), strides (1,2,2,1)
  TensorIterator it = copy_iter(dst, src);
  EXPECT_EQ(it.shape().vec(), (V{3, 2}));
  EXPECT_EQ(it.strides(0).vec(), (V{4, 12}));
  EXPECT_EQ(it.strides(1).vec(), (V{8, 4}));
  Tensor one = empty({1, 1, 1});
  Tensor other = empty({1, 1, 1}).permute({2, 0, 1});
  TensorIterator single = copy_iter(one, other);
  EXPECT_EQ(single.numel(), 1);
  EXPECT_LE(single.ndim(), 1);
  EXPECT_TRUE(single.is_contiguous());
}

TEST(TensorIterator, ZeroDimensional) {
  Tensor dst = empty({});
  Tensor src = empty({}, kInt8);
  TensorIterator it = copy_iter(dst, src);
  EXPECT_EQ(it.ndim(), 0);
  EXPECT_EQ(it.numel(), 1);
  EXPECT_TRUE(it.is_contiguous());
}

TEST(TensorIterator, EmptyShapes) {
  Tensor dst = empty({0, 3});
  Tensor src = empty({3});
  TensorIterator it = copy_iter(dst, src);
  EXPECT_EQ(it.numel(), 0);
  int calls = 0;
  it.for_each([&](char**, const int64_t*, int64_t, int64_t) { ++calls; });
  EXPECT_EQ(calls, 0);
}

TEST(TensorIterator, BroadcastErrorNamesBothSizesAndTheDimension) {
  Tensor dst = empty({2, 3});
  try {
    copy_iter(dst, empty({4, 3}));
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("(2)"));
    EXPECT_THAT(e.what(), HasSubstr("(4)"));
    EXPECT_THAT(e.what(), HasSubstr("dimension 0"));
  }
}

TEST(TensorIterator, OutputMustHaveTheBroadcastShapeWithoutResizing) {
  Tensor dst = empty({3});
  try {
    copy_iter(dst, empty({2, 3}));
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("output with shape [3] doesn't match the broadcast shape "
                                    "[2, 3]"));
  }
}

TEST(TensorIterator, AllocatesOutputsInTheInputsLayout) {
  Tensor out;
  Tensor a = empty({5, 4}, kInt32).t();  // (4, 5) with strides (1, 4)
  Tensor b = empty({4, 5}, kInt32);
  TensorIterator it = TensorIteratorConfig().add_output(out).add_input(a).build();
  EXPECT_FALSE(out.defined());  // the iterator owns what it allocates
  const Tensor& made = it.output(0);
  EXPECT_EQ(made.sizes().vec(), (V{4, 5}));
  EXPECT_EQ(made.strides().vec(), (V{1, 4}));
  EXPECT_EQ(made.dtype(), kInt32);
  EXPECT_EQ(it.shape().vec(), V{20});
  // Outputs do not constrain the shape when resizing: two inputs broadcast together.
  Tensor row = empty({5}, kInt32);
  TensorIterator it2 = TensorIteratorConfig().add_output(out).add_input(b).add_input(row).build();
  EXPECT_EQ(it2.output(0).sizes().vec(), (V{4, 5}));
  EXPECT_EQ(it2.output(0).strides().vec(), (V{5, 1}));
  EXPECT_EQ(it2.ntensors(), 3);
  EXPECT_EQ(it2.ninputs(), 2);
}

TEST(TensorIterator, DefinedOutputsAreNotResized) {
  Tensor out = empty({3});
  EXPECT_THROW(TensorIteratorConfig().add_output(out).add_input(empty({2, 3})).build(), ShapeError);
}

TEST(TensorIterator, ChecksDtypesDevicesAndOrder) {
  Tensor a = empty({2});
  Tensor b = empty({2}, kInt64);
  try {
    TensorIteratorConfig().add_output(a).add_input(b).build();
    FAIL() << "expected DTypeError";
  } catch (const DTypeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("output 0 is Float32 and input 0 is Int64"));
  }
  float host[2];
  Tensor on_sim = from_blob(host, {2}, TensorOptions().device(Device("sim:0")));
  try {
    TensorIteratorConfig().add_output(a).add_input(on_sim).build();
    FAIL() << "expected DeviceError";
  } catch (const DeviceError& e) {
    EXPECT_THAT(e.what(), HasSubstr("on cpu and input 0 is on sim:0"));
  }
  TensorIterator mixed = TensorIteratorConfig()
                             .add_output(a)
                             .add_input(on_sim)
                             .check_all_same_device(false)
                             .check_mem_overlap(false)
                             .build();
  EXPECT_EQ(mixed.common_device(), Device("sim:0"));
  EXPECT_EQ(mixed.device_type(1), DeviceType::Sim);
  TensorIteratorConfig late;
  late.add_input(a);
  EXPECT_THROW(late.add_output(b), Error);
}

TEST(TensorIterator, MemOverlapChecks) {
  Tensor base = empty({4});
  Tensor expanded = empty({1}).expand({4});
  try {
    TensorIteratorConfig().add_output(expanded).add_input(base).build();
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("share memory"));
    EXPECT_THAT(e.what(), HasSubstr("strides [0]"));
  }
  Tensor x = empty({5});
  Tensor head = x.slice(0, 0, 4), tail = x.slice(0, 1, 5);
  EXPECT_THROW(TensorIteratorConfig().add_output(tail).add_input(head).build(), Error);
  // Full overlap is an in-place operation, which is fine.
  TensorIteratorConfig().add_output(head).add_input(head.alias()).build();
  // Unchecked when asked.
  TensorIteratorConfig().add_output(tail).add_input(head).check_mem_overlap(false).build();
}

TEST(TensorIterator, ForEachPairsElementsByLogicalIndex) {
  // The input holds each element's own logical (row-major) index; after the loop the output
  // must hold, at each logical position, the same number, whatever reordering happened.
  Tensor in = arange(2 * 3 * 4 * 5, kInt32).view({2, 3, 4, 5});
  Tensor dst_base = empty({5, 3, 2, 4}, kInt32);
  Tensor dst = dst_base.permute({2, 1, 3, 0});  // (2, 3, 4, 5), scattered strides
  Tensor src = in.permute({3, 1, 0, 2}).contiguous().permute({2, 1, 3, 0});
  TensorIterator it = copy_iter(dst, src);
  it.for_each([](char** data, const int64_t* strides, int64_t n0, int64_t n1) {
    for (int64_t j = 0; j < n1; ++j) {
      for (int64_t i = 0; i < n0; ++i) {
        *reinterpret_cast<int32_t*>(data[0] + i * strides[0] + j * strides[2]) =
            *reinterpret_cast<const int32_t*>(data[1] + i * strides[1] + j * strides[3]);
      }
    }
  });
  for (int64_t i = 0; i < in.numel(); ++i) {
    const int64_t a = i / 60, b = i / 20 % 3, c = i / 5 % 4, d = i % 5;
    const int64_t off =
        a * dst.stride(0) + b * dst.stride(1) + c * dst.stride(2) + d * dst.stride(3);
    ASSERT_EQ(dst.data_ptr<int32_t>()[off], i);
  }
}

class IterThreads : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = get_num_threads(); }
  void TearDown() override { set_num_threads(saved_); }
  int saved_ = 1;
};

// A random layout of `sizes`: a permuted, sliced view of a larger buffer (or, for inputs, with
// some size-1 dimensions expanded).
Tensor random_view(std::mt19937_64& rng, IntArrayRef sizes, bool allow_broadcast) {
  const auto rank = static_cast<int64_t>(sizes.size());
  DimVector perm(static_cast<size_t>(rank));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  DimVector steps(static_cast<size_t>(rank)), base_sizes(static_cast<size_t>(rank));
  DimVector own_sizes(sizes);
  for (int64_t d = 0; d < rank; ++d) {
    if (allow_broadcast && rng() % 4 == 0) own_sizes[d] = 1;
    steps[d] = 1 + static_cast<int64_t>(rng() % 2);
  }
  // The buffer holds the view's dims in the order perm says, each stretched by its step.
  for (int64_t k = 0; k < rank; ++k) base_sizes[k] = own_sizes[perm[k]] * steps[perm[k]];
  Tensor t = empty(base_sizes, kInt32);
  DimVector inverse(static_cast<size_t>(rank));
  for (int64_t k = 0; k < rank; ++k) inverse[perm[k]] = k;
  t = t.permute(inverse);
  for (int64_t d = 0; d < rank; ++d) t = t.slice(d, 0, std::nullopt, steps[d]);
  return allow_broadcast ? t.expand(sizes) : t;
}

TEST_F(IterThreads, ForEachCoversEveryElementOnceAndKeepsThePostconditions) {
  SCOPED_TRACE(testing::seed_trace());
  auto rng = testing::test_rng();
  for (int trial = 0; trial < 300; ++trial) {
    set_num_threads(1 + trial % 2);
    const auto rank = static_cast<int64_t>(rng() % 7);
    DimVector sizes(static_cast<size_t>(rank));
    for (auto& s : sizes) s = static_cast<int64_t>(rng() % 5) + (rng() % 8 == 0 ? 0 : 1);
    Tensor dst = random_view(rng, sizes, false);
    Tensor src = random_view(rng, sizes, true);
    dst.zero_();
    TensorIterator it = copy_iter(dst, src);
    SCOPED_TRACE(::testing::Message() << "sizes " << IntArrayRef(sizes) << " dst strides "
                                      << dst.strides() << " src strides " << src.strides());
    if (it.numel() > 0 && it.ndim() > 1) {
      for (int64_t s : it.shape()) EXPECT_NE(s, 1);
    }
    for (int d = 0; d + 1 < it.ndim(); ++d) {
      bool all = true;
      for (int a = 0; a < 2; ++a)
        all = all && it.shape()[d] * it.strides(a)[d] == it.strides(a)[d + 1];
      EXPECT_FALSE(all) << "dims " << d << " and " << d + 1 << " could still merge";
      if (it.strides(0)[d] != 0 && it.strides(0)[d + 1] != 0) {
        EXPECT_LE(it.strides(0)[d], it.strides(0)[d + 1]);
      }
    }
    // Count visits with a small grain so that two threads really split the work.
    it.for_each(
        [](char** data, const int64_t* strides, int64_t n0, int64_t n1) {
          for (int64_t j = 0; j < n1; ++j) {
            for (int64_t i = 0; i < n0; ++i) {
              ++*reinterpret_cast<int32_t*>(data[0] + i * strides[0] + j * strides[2]);
            }
          }
        },
        /*grain_size=*/7);
    const auto* p = dst.data_ptr<int32_t>();
    for_each_element_offset(dst.sizes(), dst.strides(),
                            [&](int64_t off) { ASSERT_EQ(p[off], 1) << "offset " << off; });
  }
}

TEST(TensorIterator, SerialForEachOverArbitraryRanges) {
  Tensor dst = empty({3, 4, 5}, kInt32).permute({1, 2, 0});
  Tensor src = empty({4, 5, 3}, kInt32);
  dst.zero_();
  TensorIterator it = copy_iter(dst, src);
  ASSERT_EQ(it.ndim(), 2);
  auto count = [](char** data, const int64_t* strides, int64_t n0, int64_t n1) {
    for (int64_t j = 0; j < n1; ++j) {
      for (int64_t i = 0; i < n0; ++i) {
        ++*reinterpret_cast<int32_t*>(data[0] + i * strides[0] + j * strides[2]);
      }
    }
  };
  for (int64_t cut : {0, 1, 4, 5, 17, 59, 60}) {
    it.serial_for_each(count, {0, cut});
    it.serial_for_each(count, {cut, it.numel()});
  }
  const auto* p = dst.data_ptr<int32_t>();
  for_each_element_offset(dst.sizes(), dst.strides(), [&](int64_t off) { ASSERT_EQ(p[off], 7); });
}

TEST(TensorIterator, BroadcastShapesThatOverflowAreRefused) {
  // Each input holds 2^40 elements; their broadcast would hold 2^80.
  const int64_t big = int64_t{1} << 40;
  Tensor column = zeros({1, 1}, kUInt8).expand({big, 1});
  Tensor row = zeros({1, 1}, kUInt8).expand({1, big});
  try {
    TensorIteratorConfig().add_output(Tensor()).add_input(column).add_input(row).build();
    ADD_FAILURE() << "expected a ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("TensorIterator: storage size calculation overflowed"));
    EXPECT_THAT(e.what(), HasSubstr("[1099511627776, 1099511627776]"));
  }
  // An allocated output of an empty broadcast whose dense strides would not fit.
  Tensor empty_wide = zeros({0}, kUInt8).view({0, big, 1}).expand({0, big, big});
  try {
    TensorIteratorConfig().add_output(Tensor()).add_input(empty_wide).build();
    ADD_FAILURE() << "expected a ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("expected an output shape whose dense strides fit int64"));
  }
}

}  // namespace
}  // namespace ferry
