// Factories: layouts, values, dtype defaults, seeding, from_blob ownership, and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "ferry/ferry.h"

namespace ferry {
namespace {

using V = std::vector<int64_t>;

template <typename T>
std::vector<double> values(const Tensor& t) {
  std::vector<double> out;
  const T* p = t.data_ptr<T>();
  for (int64_t i = 0; i < t.numel(); ++i) out.push_back(static_cast<double>(p[i]));
  return out;
}

TEST(Factories, EmptyLayouts) {
  EXPECT_EQ(empty({2, 3}).strides().vec(), (V{3, 1}));
  EXPECT_EQ(empty({2, 3}).dtype(), kFloat);
  Tensor s = empty_strided({2, 3}, {1, 2}, kDouble);
  EXPECT_EQ(s.strides().vec(), (V{1, 2}));
  EXPECT_GE(s.storage().nbytes(), 6 * sizeof(double));
  EXPECT_EQ(empty({0, 5}).numel(), 0);
  EXPECT_THROW(empty({2, -1}), ShapeError);
  EXPECT_THROW(empty_strided({2}, {1, 1}), ShapeError);
}

TEST(Factories, EmptyLikePreservesDenseLayouts) {
  Tensor a = empty({2, 3, 4}).permute({2, 0, 1});
  Tensor b = empty_like(a);
  EXPECT_EQ(b.strides().vec(), a.strides().vec());
  EXPECT_EQ(empty_like(a, kHalf).dtype(), kHalf);
  EXPECT_EQ(empty_like(a, {}, MemoryFormat::Contiguous).strides().vec(), (V{6, 3, 1}));
  // Not dense (a slice with a step): falls back to the suggested format.
  Tensor sliced = empty({4, 6}).slice(1, 0, 6, 2);
  EXPECT_EQ(empty_like(sliced).strides().vec(), (V{3, 1}));
  Tensor cl = empty({2, 3, 4, 5}, MemoryFormat::ChannelsLast).slice(3, 0, 4, 2);
  EXPECT_TRUE(empty_like(cl).is_contiguous(MemoryFormat::ChannelsLast));
  // Expanded: not dense either.
  EXPECT_EQ(empty_like(empty({3, 1}).expand({3, 4})).strides().vec(), (V{4, 1}));
}

TEST(Factories, FullZerosOnes) {
  EXPECT_EQ(values<float>(zeros({3})), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(values<int32_t>(ones({2}, kInt)), (std::vector<double>{1, 1}));
  EXPECT_EQ(full({2}, 7).dtype(), kLong);
  EXPECT_EQ(full({2}, 7.5).dtype(), kFloat);
  EXPECT_EQ(full({2}, true).dtype(), kBool);
  EXPECT_EQ(full({2}, std::complex<double>(1, 1)).dtype(), kComplex64);
  EXPECT_EQ(values<BFloat16>(full({2}, 1.5, kBFloat16)), (std::vector<double>{1.5, 1.5}));
  Tensor like = full_like(empty({2, 2}, kHalf), 3);
  EXPECT_EQ(like.dtype(), kHalf);
  EXPECT_EQ(values<Half>(like), (std::vector<double>{3, 3, 3, 3}));
}

TEST(Factories, FillWritesThroughViews) {
  Tensor a = zeros({3, 4});
  a.slice(1, 1, 4, 2).fill_(5);
  EXPECT_EQ(values<float>(a), (std::vector<double>{0, 5, 0, 5, 0, 5, 0, 5, 0, 5, 0, 5}));
  a.t()[0].fill_(-1);
  EXPECT_EQ(values<float>(a), (std::vector<double>{-1, 5, 0, 5, -1, 5, 0, 5, -1, 5, 0, 5}));
  // A negated view stores the negation so that it reads back the value.
  Tensor n = zeros({2});
  n._neg_view().fill_(3);
  EXPECT_EQ(values<float>(n), (std::vector<double>{-3, -3}));
  Tensor c = zeros({1}, kComplex128);
  c.conj().fill_(std::complex<double>(1, 2));
  EXPECT_EQ(c.item<std::complex<double>>(), std::complex<double>(1, -2));
}

TEST(Factories, Arange) {
  Tensor a = arange(24, kFloat).view({2, 3, 4});
  EXPECT_EQ(a.select(0, 1).select(0, 2).select(0, 0).item<float>(), 20.0f);
  EXPECT_EQ(arange(5).dtype(), kLong);
  EXPECT_EQ(values<int64_t>(arange(1, 10, 3)), (std::vector<double>{1, 4, 7}));
  EXPECT_EQ(arange(0.0, 1.0, 0.25).dtype(), kFloat);
  EXPECT_EQ(values<float>(arange(0.0, 1.0, 0.25)), (std::vector<double>{0, 0.25, 0.5, 0.75}));
  EXPECT_EQ(values<int64_t>(arange(5, 0, -2)), (std::vector<double>{5, 3, 1}));
  EXPECT_EQ(arange(3, 3).numel(), 0);
  EXPECT_THROW(arange(0, 5, 0), Error);
  EXPECT_THROW(arange(5, 0, 1), Error);
}

TEST(Factories, RandomIsSeedableAndInRange) {
  Generator g1(42), g2(42), g3(43);
  Tensor a = rand({1000}, kFloat, &g1);
  Tensor b = rand({1000}, kFloat, &g2);
  Tensor c = rand({1000}, kFloat, &g3);
  EXPECT_EQ(values<float>(a), values<float>(b));
  EXPECT_NE(values<float>(a), values<float>(c));
  // The generator advances: the next draw differs.
  EXPECT_NE(values<float>(rand({1000}, kFloat, &g1)), values<float>(a));
  double sum = 0;
  for (double v : values<float>(a)) {
    EXPECT_GE(v, 0.0);
    EXPECT_LT(v, 1.0);
    sum += v;
  }
  EXPECT_NEAR(sum / 1000, 0.5, 0.05);
  manual_seed(7);
  Tensor d = randn({4000}, kDouble);
  manual_seed(7);
  EXPECT_EQ(values<double>(randn({4000}, kDouble)), values<double>(d));
  double mean = 0, var = 0;
  for (double v : values<double>(d)) mean += v / 4000;
  for (double v : values<double>(d)) var += (v - mean) * (v - mean) / 4000;
  EXPECT_NEAR(mean, 0.0, 0.1);
  EXPECT_NEAR(var, 1.0, 0.1);
  Tensor r = randint(-3, 4, {2000});
  EXPECT_EQ(r.dtype(), kLong);
  std::set<double> seen;
  for (double v : values<int64_t>(r)) seen.insert(v);
  EXPECT_EQ(seen, (std::set<double>{-3, -2, -1, 0, 1, 2, 3}));
  for (double v : values<BFloat16>(rand({5000}, kBFloat16))) EXPECT_LT(v, 1.0);
  EXPECT_THROW(rand({2}, kInt), DTypeError);
  EXPECT_THROW(randint(3, 3, {2}), Error);
}

// The draws depend on the element's index only, so a tensor generated over the pool's threads
// equals one generated on one thread, element for element, whatever the chunking.
TEST(Factories, RandomValuesDoNotDependOnTheThreadCount) {
  const int saved = get_num_threads();
  const int64_t n = 100003;  // several chunks and a short last one
  std::vector<std::vector<double>> draws[2];
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    Generator g(1234);
    auto& out = draws[threads - 1];
    out.push_back(values<double>(randn({n}, kDouble, &g)));
    out.push_back(values<float>(rand({n}, kFloat, &g)));
    out.push_back(values<int64_t>(randint(-1000, 1000, {n}, {}, &g)));
    out.push_back(values<float>(arange(0, n, 1, kFloat)));
  }
  set_num_threads(saved);
  for (size_t k = 0; k < draws[0].size(); ++k) EXPECT_EQ(draws[0][k], draws[1][k]) << "draw " << k;
}

TEST(Factories, FromBlob) {
  float data[6] = {0, 1, 2, 3, 4, 5};
  Tensor t = from_blob(data, {2, 3});
  EXPECT_EQ(t.data_ptr(), data);
  EXPECT_EQ(t.select(1, 2).select(0, 1).item<float>(), 5.0f);
  Tensor u = from_blob(data, {3, 2}, {1, 3});
  EXPECT_EQ(u.select(0, 2).select(0, 1).item<float>(), 5.0f);
  int deleted = 0;
  {
    Tensor owned = from_blob(data, {6}, {1}, [&](void* p) {
      EXPECT_EQ(p, data);
      ++deleted;
    });
    Tensor view = owned.view({2, 3});
    owned = Tensor();
    EXPECT_EQ(deleted, 0);
  }
  EXPECT_EQ(deleted, 1);
}

}  // namespace
}  // namespace ferry
