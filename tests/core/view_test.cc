// Every view against hand-computed sizes, strides and storage offsets, and the errors that name
// the argument, the value and the valid range.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ferry/ferry.h"

namespace ferry {
namespace {

using V = std::vector<int64_t>;

Tensor blank(IntArrayRef sizes, ScalarType dtype = kFloat) {
  return make_tensor(Storage(1024 * 1024, cpu_allocator(), Device("cpu")), dtype, sizes,
                     contiguous_strides(sizes));
}

void expect_layout(const Tensor& t, V sizes, V strides, int64_t offset) {
  EXPECT_EQ(t.sizes().vec(), sizes);
  EXPECT_EQ(t.strides().vec(), strides);
  EXPECT_EQ(t.storage_offset(), offset);
}

// Runs `fn`, expecting error type E whose message contains each of `parts`.
template <typename E, typename Fn>
void expect_error(Fn&& fn, std::vector<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "expected an error mentioning " << parts.front();
  } catch (const E& e) {
    for (const auto& p : parts) {
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "missing \"" << p << "\" in: " << e.what();
    }
  }
}

TEST(Views, ShareStorage) {
  Tensor a = blank({2, 3, 4});
  Tensor b = a.permute({2, 0, 1});
  EXPECT_TRUE(b.is_alias_of(a));
  EXPECT_FALSE(b.is_same(a));
  EXPECT_EQ(b.data_ptr(), a.data_ptr());
  EXPECT_FALSE(a.is_alias_of(blank({2})));
}

TEST(Views, View) {
  Tensor a = blank({2, 3, 4});
  expect_layout(a.view({6, 4}), {6, 4}, {4, 1}, 0);
  expect_layout(a.view({-1}), {24}, {1}, 0);
  expect_layout(a.view({4, -1, 2}), {4, 3, 2}, {6, 2, 1}, 0);
  expect_layout(a.view({1, 24, 1}), {1, 24, 1}, {24, 1, 1}, 0);
  // A transposed tensor can split/merge dims inside contiguous runs only.
  Tensor t = a.transpose(1, 2);  // sizes [2, 4, 3], strides [12, 1, 4]
  expect_layout(t.view({2, 2, 2, 3}), {2, 2, 2, 3}, {12, 2, 1, 4}, 0);
  expect_error<ShapeError>([&] { t.view({8, 3}); }, {"view", "[8, 3]", "reshape"});
  expect_error<ShapeError>([&] { a.view({5, 5}); }, {"[5, 5]", "24"});
  expect_error<ShapeError>([&] { a.view({-1, -1}); }, {"-1"});
  // Empty tensors: any shape of 0 elements.
  Tensor e = blank({0, 4});
  expect_layout(e.view({2, 0}), {2, 0}, {1, 1}, 0);
  expect_error<ShapeError>([&] { e.view({0, -1}); }, {"-1"});
  // 0-d.
  Tensor s = blank({});
  expect_layout(s.view({1, 1}), {1, 1}, {1, 1}, 0);
  expect_layout(s.view({}), {}, {}, 0);
}

TEST(Views, ReshapeCopiesOnlyWhenNeeded) {
  Tensor a = blank({2, 3, 4});
  Tensor r = a.reshape({4, 6});
  EXPECT_TRUE(r.is_alias_of(a));
  expect_layout(r, {4, 6}, {6, 1}, 0);
}

TEST(Views, ReshapeCopiesWhenNoViewFits) {
  Tensor a = arange(6, kInt64).view({2, 3});
  // The transpose reads 0 3 1 4 2 5: no strides give that as one flat run, so reshape copies.
  Tensor r = a.transpose(0, 1).reshape({-1});
  EXPECT_FALSE(r.is_alias_of(a));
  expect_layout(r, {6}, {1}, 0);
  std::vector<int64_t> got(r.data_ptr<int64_t>(), r.data_ptr<int64_t>() + 6);
  EXPECT_EQ(got, (V{0, 3, 1, 4, 2, 5}));
  // The copy is the source's values, not a view of them: writing a leaves r alone.
  a.fill_(7);
  EXPECT_EQ(r.data_ptr<int64_t>()[1], 3);
  // Into a shape that splits the copied run, with lazy bits materialized in the copy.
  Tensor n = a.transpose(0, 1)._neg_view().reshape({2, 3});
  EXPECT_FALSE(n.is_alias_of(a));
  expect_layout(n, {2, 3}, {3, 1}, 0);
  EXPECT_EQ(n.select(1, 2).select(0, 1).item<int64_t>(), -7);
  // A strided slice whose elements are evenly spaced still reshapes as a view.
  Tensor every_other = arange(12, kInt64).slice(0, 0, std::nullopt, 2);
  EXPECT_TRUE(every_other.reshape({2, 3}).is_alias_of(every_other));
}

TEST(Views, Permute) {
  Tensor a = blank({2, 3, 4});
  expect_layout(a.permute({2, 0, 1}), {4, 2, 3}, {1, 12, 4}, 0);
  expect_layout(a.permute({-1, -3, -2}), {4, 2, 3}, {1, 12, 4}, 0);
  expect_error<ShapeError>([&] { a.permute({0, 1}); }, {"permute", "rank 3", "[0, 1]"});
  expect_error<IndexError>([&] { a.permute({0, 1, 1}); }, {"dim 1", "[0, 1, 1]"});
  expect_error<IndexError>([&] { a.permute({0, 1, 3}); }, {"permute dim", "[-3, 2]", "got 3"});
}

TEST(Views, TransposeAndT) {
  Tensor a = blank({2, 3, 4});
  expect_layout(a.transpose(0, 2), {4, 3, 2}, {1, 4, 12}, 0);
  expect_layout(a.transpose(-1, 1), {2, 4, 3}, {12, 1, 4}, 0);
  expect_layout(blank({3, 5}).t(), {5, 3}, {1, 5}, 0);
  expect_layout(blank({5}).t(), {5}, {1}, 0);
  expect_layout(blank({}).t(), {}, {}, 0);
  expect_error<ShapeError>([&] { a.t(); }, {"at most 2", "3 dimensions"});
  expect_error<IndexError>([&] { a.transpose(0, 3); }, {"transpose dim1", "[-3, 2]", "got 3"});
}

TEST(Views, Slice) {
  Tensor a = blank({4, 10});
  expect_layout(a.slice(1, 2, 8, 3), {4, 2}, {10, 3}, 2);
  expect_layout(a.slice(1, std::nullopt, std::nullopt, 2), {4, 5}, {10, 2}, 0);
  expect_layout(a.slice(0, 1), {3, 10}, {10, 1}, 10);
  expect_layout(a.slice(1, -3), {4, 3}, {10, 1}, 7);
  expect_layout(a.slice(1, -100, 100), {4, 10}, {10, 1}, 0);
  expect_layout(a.slice(1, 8, 2), {4, 0}, {10, 1}, 8);
  expect_layout(a.slice(-1, 1, 10, 4), {4, 3}, {10, 4}, 1);
  // Slices of slices compose offsets and strides.
  expect_layout(a.slice(1, 1, 9, 2).slice(1, 1, 3), {4, 2}, {10, 2}, 3);
  expect_error<IndexError>([&] { a.slice(1, 0, 4, 0); }, {"step", "positive", "got 0"});
  expect_error<IndexError>([&] { a.slice(2, 0, 4); }, {"slice dim", "[-2, 1]", "got 2"});
  expect_error<ShapeError>(
      [&] { blank({}).slice(0, 0, 1); },
      {"slice: expected a tensor with at least 1 dimension", "but got a 0-d tensor"});
}

TEST(Views, Narrow) {
  Tensor a = blank({4, 10});
  expect_layout(a.narrow(1, 3, 4), {4, 4}, {10, 1}, 3);
  expect_layout(a.narrow(0, -2, 2), {2, 10}, {10, 1}, 20);
  expect_error<IndexError>([&] { a.narrow(1, 8, 3); }, {"length", "[0, 2]", "got 3"});
  expect_error<IndexError>([&] { a.narrow(1, 11, 0); }, {"start", "[-10, 10]", "got 11"});
  expect_error<ShapeError>(
      [&] { blank({}).narrow(0, 0, 1); },
      {"narrow: expected a tensor with at least 1 dimension", "but got a 0-d tensor"});
}

TEST(Views, Select) {
  Tensor a = blank({2, 3, 4});
  expect_layout(a.select(1, 2), {2, 4}, {12, 1}, 8);
  expect_layout(a.select(-1, -1), {2, 3}, {12, 4}, 3);
  expect_layout(a[1], {3, 4}, {4, 1}, 12);
  expect_layout(a[1][2][3], {}, {}, 23);
  expect_error<IndexError>([&] { a.select(0, 2); }, {"index", "[-2, 1]", "got 2"});
  expect_error<IndexError>([&] { a.select(3, 0); }, {"select dim", "[-3, 2]", "got 3"});
  expect_error<IndexError>(
      [&] { blank({}).select(0, 0); },
      {"select: expected a tensor with at least 1 dimension", "but got a 0-d tensor"});
}

TEST(Views, Expand) {
  Tensor col = blank({3, 1});
  expect_layout(col.expand({3, 5}), {3, 5}, {1, 0}, 0);
  expect_layout(col.expand({2, 3, 5}), {2, 3, 5}, {0, 1, 0}, 0);
  expect_layout(col.expand({-1, 4}), {3, 4}, {1, 0}, 0);
  expect_layout(blank({}).expand({2, 2}), {2, 2}, {0, 0}, 0);
  expect_layout(col.expand_as(blank({7, 3, 2})), {7, 3, 2}, {0, 1, 0}, 0);
  expect_error<ShapeError>(
      [&] {
        col.expand({4, 5});
      },
      {"expanded size (4)", "existing size (3)", "dimension 0"});
  expect_error<ShapeError>([&] { col.expand({5}); }, {"at least", "[5]"});
}

TEST(Views, UnsqueezeSqueeze) {
  Tensor a = blank({2, 3});
  expect_layout(a.unsqueeze(0), {1, 2, 3}, {6, 3, 1}, 0);
  expect_layout(a.unsqueeze(1), {2, 1, 3}, {3, 3, 1}, 0);
  expect_layout(a.unsqueeze(2), {2, 3, 1}, {3, 1, 1}, 0);
  expect_layout(a.unsqueeze(-1), {2, 3, 1}, {3, 1, 1}, 0);
  expect_error<IndexError>([&] { a.unsqueeze(3); },
                           {"unsqueeze dim", "[-3, 2]", "for a 2-d tensor", "got 3"});
  expect_error<IndexError>([&] { a.unsqueeze(-4); }, {"for a 2-d tensor", "got -4"});
  expect_layout(blank({}).unsqueeze(-1), {1}, {1}, 0);
  expect_error<IndexError>([&] { blank({}).unsqueeze(1); },
                           {"[-1, 0]", "for a 0-d tensor", "got 1"});
  Tensor b = blank({1, 2, 1, 3});
  expect_layout(b.squeeze(), {2, 3}, {3, 1}, 0);
  expect_layout(b.squeeze(2), {1, 2, 3}, {6, 3, 1}, 0);
  expect_layout(b.squeeze(1), {1, 2, 1, 3}, {6, 3, 3, 1}, 0);
  expect_layout(blank({}).squeeze(0), {}, {}, 0);
}

TEST(Views, Flatten) {
  Tensor a = blank({2, 3, 4, 5});
  expect_layout(a.flatten(), {120}, {1}, 0);
  expect_layout(a.flatten(1, 2), {2, 12, 5}, {60, 5, 1}, 0);
  expect_layout(a.flatten(-2), {2, 3, 20}, {60, 20, 1}, 0);
  expect_layout(a.flatten(2, 2), {2, 3, 4, 5}, {60, 20, 5, 1}, 0);
  expect_layout(blank({}).flatten(), {1}, {1}, 0);
  EXPECT_TRUE(a.permute({0, 1, 3, 2}).flatten(0, 1).is_alias_of(a));
  expect_error<IndexError>([&] { a.flatten(2, 1); }, {"start_dim <= end_dim"});
}

TEST(Views, AsStridedChecksBounds) {
  Tensor a =
      make_tensor(Storage(24 * 4, cpu_allocator(), Device("cpu")), kFloat, {2, 3, 4}, {12, 4, 1});
  expect_layout(a.as_strided({3, 3}, {8, 1}, 4), {3, 3}, {8, 1}, 4);
  expect_error<ShapeError>([&] { a.as_strided({3, 3}, {8, 1}, 8); }, {"reach 108 bytes", "96"});
  expect_error<ShapeError>([&] { a.as_strided({3}, {1, 1}); }, {"as many strides"});
  expect_error<ShapeError>([&] { a.as_strided({2}, {-1}); }, {"non-negative strides"});
}

TEST(Views, ConjAndNegBits) {
  Tensor c = blank({3}, kComplex64);
  EXPECT_FALSE(c.is_conj());
  Tensor cc = c.conj();
  EXPECT_TRUE(cc.is_conj());
  EXPECT_TRUE(cc.is_alias_of(c));
  EXPECT_FALSE(cc.conj().is_conj());
  // Views keep the bits.
  EXPECT_TRUE(cc.unsqueeze(0).is_conj());
  EXPECT_TRUE(cc.slice(0, 1).is_conj());
  Tensor r = blank({3});
  EXPECT_TRUE(r.conj().is_same(r));
  EXPECT_TRUE(r._neg_view().is_neg());
  EXPECT_FALSE(r._neg_view()._neg_view().is_neg());
}

TEST(Views, DimWrapping) {
  EXPECT_EQ(wrap_dim(-1, 3), 2);
  EXPECT_EQ(wrap_dim(0, 0), 0);
  EXPECT_EQ(wrap_dim(-1, 0), 0);
  expect_error<IndexError>([] { wrap_dim(1, 0); }, {"[-1, 0]", "0-d", "got 1"});
  Tensor a = blank({2, 3});
  EXPECT_EQ(a.size(-1), 3);
  EXPECT_EQ(a.stride(0), 3);
  expect_error<IndexError>([&] { a.size(2); }, {"dim", "[-2, 1]", "got 2"});
}

TEST(Views, BroadcastShapes) {
  EXPECT_EQ(IntArrayRef(broadcast_shapes({2, 1, 3}, {4, 3})).vec(), (V{2, 4, 3}));
  EXPECT_EQ(IntArrayRef(broadcast_shapes({}, {5, 1})).vec(), (V{5, 1}));
  EXPECT_EQ(IntArrayRef(broadcast_shapes({0, 1}, {1, 7})).vec(), (V{0, 7}));
  expect_error<ShapeError>([] { broadcast_shapes({2, 3}, {4, 3}); }, {"(2)", "(4)", "dimension 0"});
}

}  // namespace
}  // namespace ferry
