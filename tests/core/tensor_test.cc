// Tensor accessors, layout predicates (contiguity in each memory format, density, the
// channels-last heuristic), typed data access, SmallVector and convert_value.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ferry/ferry.h"

namespace ferry {
namespace {

using V = std::vector<int64_t>;

Tensor strided(IntArrayRef sizes, IntArrayRef strides, ScalarType dtype = kFloat) {
  return make_tensor(Storage(1 << 16, cpu_allocator(), Device("cpu")), dtype, sizes, strides);
}

TEST(Tensor, Accessors) {
  Tensor t = empty({2, 3, 4}, kBFloat16);
  EXPECT_TRUE(t.defined());
  EXPECT_FALSE(Tensor().defined());
  EXPECT_EQ(t.dim(), 3);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.dtype(), kBFloat16);
  EXPECT_EQ(t.element_size(), 2u);
  EXPECT_EQ(t.nbytes(), 48u);
  EXPECT_EQ(t.device(), Device("cpu"));
  EXPECT_EQ(t.storage_offset(), 0);
  EXPECT_EQ(t.strides().vec(), (V{12, 4, 1}));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data_ptr()) % kCpuAlignment, 0u);
  Tensor s = t.select(0, 1);
  EXPECT_EQ(static_cast<char*>(s.data_ptr()) - static_cast<char*>(t.data_ptr()), 24);
  EXPECT_EQ(s.data_ptr<BFloat16>(), t.data_ptr<BFloat16>() + 12);
  EXPECT_THROW(t.data_ptr<float>(), DTypeError);
}

TEST(Tensor, HandleSemantics) {
  Tensor a = empty({4});
  Tensor b = a;
  EXPECT_TRUE(a.is_same(b));
  EXPECT_EQ(a.use_count(), 2);
  Tensor c = a.view({2, 2});
  EXPECT_FALSE(c.is_same(a));
  EXPECT_EQ(a.storage().use_count(), 2);
}

TEST(Tensor, SizesLiveInline) {
  DimVector six{1, 2, 3, 4, 5, 6};
  EXPECT_TRUE(six.is_inline());
  DimVector seven{1, 2, 3, 4, 5, 6, 7};
  EXPECT_FALSE(seven.is_inline());
  EXPECT_EQ(seven.size(), 7u);
  DimVector moved = std::move(seven);
  EXPECT_EQ(moved[6], 7);
  moved.erase(moved.begin());
  moved.insert(moved.begin() + 2, 9);
  EXPECT_EQ(IntArrayRef(moved).vec(), (V{2, 3, 9, 4, 5, 6, 7}));
  Tensor t = empty({1, 1, 1, 1, 1, 2, 3});
  EXPECT_EQ(t.dim(), 7);
  EXPECT_EQ(t.sizes().vec(), (V{1, 1, 1, 1, 1, 2, 3}));
}

TEST(Tensor, SetStorageChecksTheBytesItsLayoutReaches) {
  Tensor t = empty({2, 3}, kFloat32).slice(1, 1);  // [2, 2], strides [3, 1], offset 1
  TensorImpl& impl = *t.impl();
  const auto storage = [](size_t nbytes) {
    return Storage(nbytes, cpu_allocator(), Device("cpu"));
  };
  // Reaches elements 1..5: (1 + 5) * 4 = 24 bytes.
  try {
    impl.set_storage(storage(20));
    ADD_FAILURE() << "a 20-byte storage was taken";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("expected a storage of at least 24 bytes for sizes [2, "
                                         "2], strides [3, 1] and offset 1, but got 20 bytes"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(impl.storage().nbytes(), 24u);  // unchanged: the slice's own storage
  Storage fresh = storage(24);
  impl.set_storage(fresh);
  EXPECT_EQ(t.storage().data(), fresh.data());
  EXPECT_EQ(t.device(), Device("cpu"));
}

TEST(Tensor, Contiguity) {
  EXPECT_TRUE(strided({2, 3}, {3, 1}).is_contiguous());
  EXPECT_FALSE(strided({2, 3}, {1, 2}).is_contiguous());
  EXPECT_TRUE(strided({2, 1, 3}, {3, 99, 1}).is_contiguous());  // size-1 strides don't matter
  EXPECT_TRUE(strided({0, 3}, {7, 5}).is_contiguous());         // empty
  EXPECT_TRUE(strided({}, {}).is_contiguous());
  EXPECT_FALSE(strided({4}, {2}).is_contiguous());
  EXPECT_TRUE(strided({2, 3}, {1, 2}).is_non_overlapping_and_dense());
  EXPECT_FALSE(strided({2, 3}, {0, 1}).is_non_overlapping_and_dense());
  EXPECT_FALSE(strided({2, 3}, {6, 2}).is_non_overlapping_and_dense());
  EXPECT_TRUE(strided({4}, {1}).is_non_overlapping_and_dense());
}

TEST(Tensor, ChannelsLast) {
  Tensor c =
      empty({8, 3, 5, 5}, TensorOptions().dtype(kHalf).memory_format(MemoryFormat::ChannelsLast));
  EXPECT_EQ(c.strides().vec(), (V{75, 1, 15, 3}));
  EXPECT_TRUE(c.is_contiguous(MemoryFormat::ChannelsLast));
  EXPECT_FALSE(c.is_contiguous());
  EXPECT_TRUE(c.is_non_overlapping_and_dense());
  EXPECT_EQ(c.suggest_memory_format(), MemoryFormat::ChannelsLast);
  Tensor n = empty({8, 3, 5, 5});
  EXPECT_FALSE(n.is_contiguous(MemoryFormat::ChannelsLast));
  EXPECT_EQ(n.suggest_memory_format(), MemoryFormat::Contiguous);
  // NCHW with C == 1 is both; the heuristic says contiguous.
  Tensor one = empty({8, 1, 5, 5});
  EXPECT_TRUE(one.is_contiguous(MemoryFormat::ChannelsLast));
  EXPECT_EQ(one.suggest_memory_format(), MemoryFormat::Contiguous);
  // Permuting NHWC storage to NCHW view is channels-last.
  Tensor nhwc = empty({2, 4, 4, 3}).permute({0, 3, 1, 2});
  EXPECT_TRUE(nhwc.is_contiguous(MemoryFormat::ChannelsLast));
  EXPECT_EQ(nhwc.suggest_memory_format(), MemoryFormat::ChannelsLast);
  Tensor c3 = empty({2, 3, 4, 5, 6}, MemoryFormat::ChannelsLast3d);
  EXPECT_EQ(c3.strides().vec(), (V{360, 1, 90, 18, 3}));
  EXPECT_TRUE(c3.is_contiguous(MemoryFormat::ChannelsLast3d));
  EXPECT_EQ(c3.suggest_memory_format(), MemoryFormat::ChannelsLast3d);
  EXPECT_THROW(empty({2, 3}, MemoryFormat::ChannelsLast), ShapeError);
}

TEST(Tensor, ItemAppliesLazyBits) {
  Tensor f = full({1, 1}, 2.5);
  EXPECT_EQ(f.item<float>(), 2.5f);
  EXPECT_EQ(f._neg_view().item<double>(), -2.5);
  EXPECT_EQ(f.item<int64_t>(), 2);
  Tensor c = full({1}, std::complex<double>(1, 2), kComplex64);
  EXPECT_EQ(c.conj().item<std::complex<double>>(), std::complex<double>(1, -2));
  EXPECT_EQ(c.conj()._neg_view().item<std::complex<double>>(), std::complex<double>(-1, 2));
  EXPECT_THROW(empty({2}).item(), ShapeError);
}

TEST(Convert, FollowsTheCopyRules) {
  EXPECT_EQ(convert_value<bool>(0.5f), true);
  EXPECT_EQ(convert_value<bool>(std::nanf("")), true);
  EXPECT_EQ(convert_value<bool>(std::complex<float>(0, 1)), true);
  EXPECT_EQ(convert_value<bool>(std::complex<float>(0, 0)), false);
  EXPECT_EQ(convert_value<float>(std::complex<double>(3, 4)), 3.0f);
  EXPECT_EQ(convert_value<std::complex<double>>(2), std::complex<double>(2, 0));
  EXPECT_EQ(convert_value<int32_t>(-2.9), -2);
  EXPECT_EQ(convert_value<int32_t>(1e10f), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(convert_value<int64_t>(std::nan("")), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(convert_value<uint8_t>(-1.0f), 255);
  EXPECT_EQ(convert_value<int8_t>(300.0), 44);
  EXPECT_EQ(convert_value<int8_t>(int64_t{257}), 1);
  EXPECT_EQ(static_cast<float>(convert_value<BFloat16>(int64_t{257})), 256.0f);
  EXPECT_EQ(convert_value<float>(convert_value<Half>(65504.0)), 65504.0f);
  EXPECT_TRUE(std::isinf(convert_value<float>(convert_value<Half>(1e6))));
  EXPECT_EQ(convert_value<int32_t>(convert_value<BFloat16>(3.75f)), 3);
  EXPECT_EQ(convert_value<uint8_t>(true), 1);
}

TEST(ScalarValue, Kinds) {
  EXPECT_TRUE(Scalar(true).is_bool());
  EXPECT_TRUE(Scalar(3).is_integral());
  EXPECT_TRUE(Scalar(3.0f).is_floating_point());
  EXPECT_TRUE(Scalar(std::complex<float>(1, 2)).is_complex());
  EXPECT_TRUE(Scalar(Half(1.5f)).is_floating_point());
  float f = 0;
  Scalar(7).to_element(&f, kFloat);
  EXPECT_EQ(f, 7.0f);
  EXPECT_EQ(Scalar::from_element(&f, kFloat).to<int>(), 7);
}

}  // namespace
}  // namespace ferry
