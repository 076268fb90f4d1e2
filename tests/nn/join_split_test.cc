// cat, stack, split, split_with_sizes and chunk: values, PyTorch's type promotion and skipping of
// 1-d empty tensors, memory formats, views that share storage, gradients, and the errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/nn/nn_ops_test_util.h"

namespace ferry::testing {
namespace {

using autograd::variable_list;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(Cat, JoinsAlongAnyDimWithTypePromotion) {
  const Tensor a = arange(6, kFloat64).view({2, 3});
  const Tensor b = arange(6, 10, 1, kInt64).view({2, 2});
  const Tensor out = cat({a, b}, 1);
  EXPECT_EQ(out.dtype(), kFloat64);
  EXPECT_THAT(values_of(out), ElementsAre(0, 1, 2, 6, 7, 3, 4, 5, 8, 9));
  EXPECT_THAT(values_of(cat({a, a}, -2)), ElementsAre(0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5));
  EXPECT_EQ(cat({a.to(kBFloat16), a.to(kFloat16)}).dtype(), kFloat32);
  EXPECT_EQ(cat({b, b.to(kInt32)}).dtype(), kInt64);
  // 1-d empty tensors are skipped whatever the others' rank.
  EXPECT_THAT(values_of(cat({zeros({0}), a, zeros({0}, kInt64)}, 1)),
              ElementsAre(0, 1, 2, 3, 4, 5));
  // A common channels-last format is kept; mixed formats give contiguous.
  const Tensor cl = ones({1, 3, 2, 2}).contiguous(MemoryFormat::ChannelsLast);
  EXPECT_TRUE(cat({cl, cl}, 1).is_contiguous(MemoryFormat::ChannelsLast));
  EXPECT_TRUE(cat({cl, ones({1, 3, 2, 2})}, 1).is_contiguous());
}

TEST(Cat, StackSplitAndChunk) {
  const Tensor a = arange(6, kFloat64).view({2, 3}), b = a + 10;
  const Tensor s = stack({a, b}, 1);
  EXPECT_EQ(s.sizes(), IntArrayRef({2, 2, 3}));
  EXPECT_THAT(values_of(s), ElementsAre(0, 1, 2, 10, 11, 12, 3, 4, 5, 13, 14, 15));
  EXPECT_EQ(stack({a, b}, -1).sizes(), IntArrayRef({2, 3, 2}));
  const Tensor x = arange(10, kFloat64);
  const std::vector<Tensor> parts = x.split(4);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_THAT(values_of(parts[2]), ElementsAre(8, 9));
  EXPECT_TRUE(parts[1].is_alias_of(x));
  const std::vector<Tensor> chunks = x.chunk(3);
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0].numel(), 4);
  EXPECT_EQ(chunks[2].numel(), 2);
  EXPECT_EQ(chunk(arange(2, kFloat64), 4).size(), 2u);  // fewer pieces than asked, as PyTorch
  EXPECT_EQ(chunk(zeros({0, 3}), 3).size(), 3u);
  const std::vector<Tensor> sized = split_with_sizes(a, {1, 2}, 1);
  EXPECT_THAT(values_of(sized[1]), ElementsAre(1, 2, 4, 5));
  EXPECT_EQ(split(zeros({0}), 0).size(), 1u);
}

TEST(Cat, GradientsAreSlicesOfTheOutputGradient) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  const Tensor a = leaf(uniform(rng, {2, 3})), b = leaf(uniform(rng, {2, 1})),
               c = leaf(uniform(rng, {2, 2}));
  EXPECT_TRUE(grad_ok(
      [](const variable_list& in) -> variable_list {
        return {cat({in[0], in[1], in[2]}, 1), stack({in[0], in[0] * 2}, 0)};
      },
      {a, b, c}));
  EXPECT_TRUE(grad_ok(
      [](const variable_list& in) -> variable_list {
        const std::vector<Tensor> p = in[0].split(2, 1);
        const std::vector<Tensor> q = in[0].chunk(2, 0);
        return {p[0] * 3, p[1], q[1] * q[1]};
      },
      {leaf(uniform(rng, {4, 3}))}));
  // Mixed dtypes: each input's gradient comes back in its own dtype.
  const Tensor f = leaf(uniform(rng, {2}, kFloat32));
  const Tensor out = cat({f, a.select(0, 0)});
  EXPECT_EQ(out.grad_fn()->name(), "CatBackward0");
  out.sum().backward();
  EXPECT_EQ(f.grad().dtype(), kFloat32);
  EXPECT_THAT(values_of(f.grad()), ElementsAre(1, 1));
}

TEST(Cat, ErrorsNameTheTensorsAndSizes) {
  const Tensor a = zeros({2, 3});
  EXPECT_THAT(error_of<ShapeError>([&] {
                cat({a, zeros({3, 3})}, 1);
              }),
              HasSubstr("Sizes of tensors must match except in dimension 1. Expected size 2 but "
                        "got size 3 for tensor number 1 in the list."));
  EXPECT_THAT(error_of<ShapeError>([&] {
                cat({a, zeros({2, 3, 1})});
              }),
              HasSubstr("Tensors must have same number of dimensions: got 2 and 3"));
  EXPECT_THAT(error_of<ShapeError>([&] { cat({zeros({})}); }),
              HasSubstr("zero-dimensional tensor (at position 0) cannot be concatenated"));
  EXPECT_THAT(error_of<ShapeError>([&] { cat(std::vector<Tensor>{}); }),
              HasSubstr("expected a non-empty list of Tensors"));
  EXPECT_THAT(error_of<IndexError>([&] { cat({a}, 2); }), HasSubstr("cat dim"));
  EXPECT_THAT(error_of<DeviceError>([&] {
                cat({a, zeros({2, 3}, Device("sim:0"))});
              }),
              HasSubstr("cpu and sim:0"));
  EXPECT_THAT(error_of<ShapeError>([&] {
                stack({a, zeros({2, 4})});
              }),
              HasSubstr("stack expects each tensor to be equal size, but got [2, 3] at entry 0 "
                        "and [2, 4] at entry 1"));
  EXPECT_THAT(error_of<ShapeError>([&] { a.split(-1); }),
              HasSubstr("split_size be non-negative, but got split_size=-1"));
  EXPECT_THAT(error_of<ShapeError>([&] { a.chunk(0); }),
              HasSubstr("chunk: expects `chunks` to be greater than 0, got: 0"));
  EXPECT_THAT(error_of<ShapeError>([&] {
                split_with_sizes(a, {1, 1}, 1);
              }),
              HasSubstr("expects split_sizes to sum exactly to 3"));
}

}  // namespace
}  // namespace ferry::testing
