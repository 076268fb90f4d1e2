// contiguous, clone, to, cpu, resolve_conj and resolve_neg: when they return the tensor itself,
// when they copy, which layout the copy gets, and that the values survive.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ferry/ferry.h"

namespace ferry {
namespace {

using ::testing::ElementsAre;
using V = std::vector<int64_t>;

std::vector<double> values(const Tensor& t) {
  Tensor d = empty(t.sizes(), kFloat64);
  d.copy_(t);
  const double* p = d.data_ptr<double>();
  return std::vector<double>(p, p + d.numel());
}

TEST(Contiguous, ReturnsSelfWhenAlreadyInTheFormat) {
  Tensor x = arange(6, kFloat32).view({2, 3});
  EXPECT_TRUE(x.contiguous().is_same(x));
  Tensor t = x.t();
  Tensor c = t.contiguous();
  EXPECT_FALSE(c.is_alias_of(t));
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_THAT(values(c), ElementsAre(0, 3, 1, 4, 2, 5));
  EXPECT_THROW(x.contiguous(MemoryFormat::Preserve), Error);
}

TEST(Contiguous, ChannelsLast) {
  Tensor x = arange(2 * 3 * 2 * 2, kFloat32).view({2, 3, 2, 2});
  Tensor cl = x.contiguous(MemoryFormat::ChannelsLast);
  EXPECT_EQ(cl.strides().vec(), (V{12, 1, 6, 3}));
  EXPECT_TRUE(cl.contiguous(MemoryFormat::ChannelsLast).is_same(cl));
  EXPECT_EQ(values(cl), values(x));
  EXPECT_THROW(arange(4).contiguous(MemoryFormat::ChannelsLast), ShapeError);
}

TEST(Clone, PreservesDenseLayoutsAndNeverAliases) {
  Tensor x = arange(24, kFloat32).view({2, 3, 4}).permute({2, 0, 1});
  Tensor c = x.clone();
  EXPECT_EQ(c.strides().vec(), x.strides().vec());
  EXPECT_FALSE(c.is_alias_of(x));
  EXPECT_EQ(values(c), values(x));
  EXPECT_EQ(x.clone(MemoryFormat::Contiguous).strides().vec(), (V{6, 3, 1}));
  // Not dense: a dense layout in the same dimension order (transposed stays transposed).
  Tensor sliced = arange(32, kFloat32).view({8, 4}).t().slice(1, 0, 8, 2);  // (4, 4), (1, 8)
  Tensor s = sliced.clone();
  EXPECT_EQ(s.strides().vec(), (V{1, 4}));
  EXPECT_EQ(values(s), values(sliced));
  // Expanded: materialized.
  Tensor e = arange(3, kFloat32).view({3, 1}).expand({3, 2}).clone();
  EXPECT_THAT(values(e), ElementsAre(0, 0, 1, 1, 2, 2));
  EXPECT_TRUE(e.is_non_overlapping_and_dense());
}

TEST(Clone, ResolvesLazyBits) {
  std::complex<float> z[] = {{1, 2}};
  Tensor c = from_blob(z, {1}, kComplex64).conj()._neg_view().clone();
  EXPECT_FALSE(c.is_conj());
  EXPECT_FALSE(c.is_neg());
  EXPECT_EQ(c.data_ptr<std::complex<float>>()[0], std::complex<float>(-1, 2));
}

TEST(To, NoCopyWhenNothingChanges) {
  Tensor x = arange(6, kFloat32).view({2, 3});
  EXPECT_TRUE(x.to(kFloat32).is_same(x));
  EXPECT_TRUE(x.to(TensorOptions(kFloat32).device(Device("cpu"))).is_same(x));
  EXPECT_TRUE(x.to(Device("cpu"), kFloat32).is_same(x));
  EXPECT_TRUE(x.to(x).is_same(x));
  EXPECT_TRUE(x.cpu().is_same(x));
  EXPECT_TRUE(x.to(kFloat32, false, false, MemoryFormat::Contiguous).is_same(x));
  Tensor lazy = x._neg_view();
  EXPECT_TRUE(lazy.to(kFloat32).is_same(lazy));  // bits kept when nothing is copied
}

TEST(To, CopyTrueForcesACopy) {
  Tensor x = arange(6, kFloat32).view({2, 3}).t();
  Tensor y = x.to(kFloat32, false, /*copy=*/true);
  EXPECT_FALSE(y.is_alias_of(x));
  EXPECT_EQ(y.strides().vec(), x.strides().vec());  // Preserve: dense layout kept
  EXPECT_EQ(values(y), values(x));
}

TEST(To, ConvertsAndAppliesFormats) {
  Tensor x = arange(6, kFloat32).view({2, 3});
  Tensor h = x.to(kBFloat16);
  EXPECT_EQ(h.dtype(), kBFloat16);
  EXPECT_THAT(values(h), ElementsAre(0, 1, 2, 3, 4, 5));
  Tensor t = x.t().to(kFloat64);
  EXPECT_EQ(t.strides().vec(), (V{1, 3}));  // keeps the transposed layout
  Tensor rowmajor = x.t().to(kFloat32, false, false, MemoryFormat::Contiguous);
  EXPECT_TRUE(rowmajor.is_contiguous());
  EXPECT_THAT(values(rowmajor), ElementsAre(0, 3, 1, 4, 2, 5));
  Tensor like = empty({1}, kInt16);
  EXPECT_EQ(x.to(like).dtype(), kInt16);
  EXPECT_THROW(x.to(TensorOptions(kHalf).memory_format(MemoryFormat::Contiguous), false, false,
                    MemoryFormat::Contiguous),
               Error);
  Tensor n = arange(3, kFloat32)._neg_view().to(kFloat64);
  EXPECT_FALSE(n.is_neg());
  EXPECT_THAT(values(n), ElementsAre(0, -1, -2));
}

TEST(To, ToAnotherDeviceGoesThroughCopy) {
  Tensor x = arange(4, kFloat32);
  Tensor y = x.to(Device("sim:0"), kFloat32);
  EXPECT_EQ(y.device(), Device("sim:0"));
  EXPECT_EQ(y.dtype(), kFloat32);
  EXPECT_FALSE(y.is_alias_of(x));
  EXPECT_THAT(values(y.cpu()), ElementsAre(0, 1, 2, 3));
  // Device and dtype in one step, from a transposed source: the layout is kept.
  Tensor m = arange(6, kInt32).view({2, 3}).t();
  Tensor z = m.to(Device("sim:0"), kFloat64);
  EXPECT_EQ(z.device(), Device("sim:0"));
  EXPECT_EQ(z.dtype(), kFloat64);
  EXPECT_EQ(z.strides().vec(), (V{1, 3}));
  EXPECT_THAT(values(z.cpu()), ElementsAre(0, 3, 1, 4, 2, 5));
  // Already there: no copy unless asked for.
  EXPECT_TRUE(y.to(Device("sim:0"), kFloat32).is_same(y));
  EXPECT_FALSE(y.to(Device("sim:0"), kFloat32, false, /*copy=*/true).is_alias_of(y));
  // And back.
  Tensor back = z.to(Device("cpu"), kInt64);
  EXPECT_TRUE(back.is_cpu());
  EXPECT_THAT(values(back), ElementsAre(0, 3, 1, 4, 2, 5));
}

TEST(Resolve, ConjAndNeg) {
  std::complex<float> z[] = {{1, 2}, {3, -4}};
  Tensor x = from_blob(z, {2}, kComplex64);
  EXPECT_TRUE(x.resolve_conj().is_same(x));
  EXPECT_TRUE(x.resolve_neg().is_same(x));
  Tensor r = x.conj().resolve_conj();
  EXPECT_FALSE(r.is_conj());
  EXPECT_FALSE(r.is_alias_of(x));
  EXPECT_EQ(r.data_ptr<std::complex<float>>()[1], std::complex<float>(3, 4));
  Tensor n = arange(3, kInt64)._neg_view().resolve_neg();
  EXPECT_FALSE(n.is_neg());
  EXPECT_THAT(values(n), ElementsAre(0, -1, -2));
  // A real tensor has no conj bit: conj() and resolve_conj() return it as it is.
  Tensor real = arange(3, kFloat32);
  EXPECT_TRUE(real.conj().is_same(real));
  EXPECT_FALSE(real.conj().is_conj());
  EXPECT_TRUE(real.conj().resolve_conj().is_same(real));
}

}  // namespace
}  // namespace ferry
