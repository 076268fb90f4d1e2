// The CUDA copy kernel's host-side plan (ferry/backends/cuda/copy_plan.h), run without a GPU on
// the problems copy_ builds from real tensors: contiguous converting copies take the dense kernel
// with 16-byte vectors when both pointers allow it, transposes of every rank take the tiled
// kernel, and the transpose geometry, walked block by block and thread by thread the way the
// kernel walks it, stores every element of the problem exactly once from the right source
// element (compared with a naive walk of the problem's sizes and strides).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>
#include <random>
#include <vector>

#include "ferry/backends/cuda/copy_plan.h"
#include "ferry/ferry.h"
#include "tests/support/random.h"

namespace ferry::testing {
namespace {

using cuda::CudaCopyKind;
using cuda::CudaCopyPlan;
using cuda::plan_cuda_copy;

CopyProblem problem_of(const Tensor& dst, const Tensor& src) {
  return copy_problem_from(build_copy_iterator(dst, src));
}

// dst byte offset -> src byte offset, for every element of the problem.
std::map<int64_t, int64_t> naive_pairs(const CopyProblem& p) {
  std::map<int64_t, int64_t> out;
  std::vector<int64_t> index(p.sizes.size(), 0);
  for (int64_t i = 0; i < p.numel(); ++i) {
    int64_t d = 0, s = 0;
    for (size_t k = 0; k < index.size(); ++k) {
      d += index[k] * p.dst_strides[k];
      s += index[k] * p.src_strides[k];
    }
    out.emplace(d, s);
    for (size_t k = 0; k < index.size(); ++k) {
      if (++index[k] < p.sizes[k]) break;
      index[k] = 0;
    }
  }
  return out;
}

// What the transpose kernel stores, walked as its grid does (every block, every grid-stride
// step, every thread of the tile); ADD_FAILURE on an element stored twice.
std::map<int64_t, int64_t> transpose_pairs(const CudaCopyPlan& plan) {
  const cuda::TransposeGeometry& g = plan.transpose;
  std::map<int64_t, int64_t> out;
  constexpr int kTile = cuda::kTransposeTile;
  for (int64_t bz = 0; bz < plan.grid_z; ++bz) {
    for (int64_t by = 0; by < plan.grid_y; ++by) {
      for (int64_t bx = 0; bx < plan.grid_x; ++bx) {
        for (int64_t b = bz; b < g.batch; b += plan.grid_z) {
          const auto at = g.batch_offsets.get(static_cast<uint64_t>(b));
          for (int64_t ty = by; ty < g.tiles_along_cols(); ty += plan.grid_y) {
            for (int64_t tx = bx; tx < g.tiles_along_rows(); tx += plan.grid_x) {
              // The store phase: thread (x, c) stores tile[x][c], which the load phase's
              // thread (c, x) read from (row0 + x, col0 + c).
              // (Threads past the last row or column store nothing: not walked.)
              const int64_t row0 = tx * kTile;
              const int64_t col0 = ty * kTile;
              for (int64_t c = 0; c < std::min<int64_t>(kTile, g.cols - col0); ++c) {
                for (int64_t x = 0; x < std::min<int64_t>(kTile, g.rows - row0); ++x) {
                  const int64_t row = row0 + x;
                  const int64_t col = col0 + c;
                  const int64_t d = static_cast<int64_t>(at.at[0]) + g.dst_offset(row, col);
                  const int64_t s = static_cast<int64_t>(at.at[1]) + g.src_offset(row, col);
                  if (!out.emplace(d, s).second) ADD_FAILURE() << "dst offset " << d << " twice";
                }
              }
            }
          }
        }
      }
    }
  }
  return out;
}

TEST(CudaCopyPlan, ContiguousConversionsTakeTheDenseKernelWithVectors) {
  const Tensor f32 = rand({1000});
  Tensor bf16 = empty({1000}, kBFloat16);
  CudaCopyPlan plan = plan_cuda_copy(problem_of(bf16, f32));
  EXPECT_EQ(plan.kind, CudaCopyKind::kDense) << plan.describe();
  EXPECT_EQ(plan.vector, 4) << "16 bytes of float32 per load; " << plan.describe();

  // A source one element off its 16-byte boundary: one element at a time.
  plan = plan_cuda_copy(problem_of(bf16.narrow(0, 0, 999), f32.narrow(0, 1, 999)));
  EXPECT_EQ(plan.kind, CudaCopyKind::kDense) << plan.describe();
  EXPECT_EQ(plan.vector, 1) << plan.describe();

  Tensor half_dst = empty({64}, kFloat16);
  plan = plan_cuda_copy(problem_of(half_dst, empty({64}, kFloat16)._neg_view()));
  EXPECT_EQ(plan.kind, CudaCopyKind::kDense) << plan.describe();
  EXPECT_EQ(plan.vector, 8) << plan.describe();

  Tensor bytes = empty({256}, kUInt8);
  plan = plan_cuda_copy(problem_of(bytes, empty({256}, kUInt8)._neg_view()));
  EXPECT_EQ(plan.vector, 16) << plan.describe();

  Tensor c128 = empty({16}, kComplex128);
  plan = plan_cuda_copy(problem_of(c128, empty({16}, kComplex128).conj()));
  EXPECT_EQ(plan.kind, CudaCopyKind::kDense) << plan.describe();
  EXPECT_EQ(plan.vector, 1) << plan.describe();
  EXPECT_EQ(plan.describe(), "dense (1 element per thread and step)");
}

TEST(CudaCopyPlan, PairsWithoutTypedKernelsAndFillsTakeTheStridedKernel) {
  Tensor f32 = empty({100});
  EXPECT_EQ(plan_cuda_copy(problem_of(f32, empty({100}, kInt32))).kind, CudaCopyKind::kStrided);
  Tensor flags = empty({100}, kBool);
  EXPECT_EQ(plan_cuda_copy(problem_of(flags, empty({100}, kBool)._neg_view())).kind,
            CudaCopyKind::kStrided);
  CopyProblem fill = problem_of(f32, empty({100}));
  fill.src_is_value = true;
  EXPECT_EQ(plan_cuda_copy(fill).kind, CudaCopyKind::kStrided);
  // Strided on both sides along dim 0 (a stepped slice): no unit-stride run to tile.
  Tensor dst = empty({50});
  EXPECT_EQ(plan_cuda_copy(problem_of(dst, empty({100}).slice(0, 0, 100, 2))).kind,
            CudaCopyKind::kStrided);
  EXPECT_TRUE(cuda::has_typed_paths(kFloat16, kFloat64));
  EXPECT_FALSE(cuda::has_typed_paths(kFloat32, kInt64));
  EXPECT_TRUE(cuda::has_typed_paths(kInt64, kInt64));
}

TEST(CudaCopyPlan, TransposeGeometryStoresEveryElementOnceFromItsSource) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  const ScalarType types[] = {kFloat32, kFloat16, kBFloat16, kFloat64};
  int transposes = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const int rank = 2 + static_cast<int>(rng() % 3);
    std::vector<int64_t> sizes;
    for (int d = 0; d < rank; ++d) sizes.push_back(1 + static_cast<int64_t>(rng() % 20));
    std::vector<int64_t> order(static_cast<size_t>(rank));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    const ScalarType src_type = types[rng() % 4];
    const ScalarType dst_type = rng() % 2 == 0 ? src_type : types[rng() % 4];
    const Tensor src = empty(sizes, src_type).permute(order);
    Tensor dst = empty(src.sizes(), dst_type);
    const CopyProblem p = problem_of(dst, src);
    const CudaCopyPlan plan = plan_cuda_copy(p);
    SCOPED_TRACE(::testing::Message() << "sizes " << src.sizes() << ", strides " << src.strides()
                                      << ", " << plan.describe());
    if (plan.kind != CudaCopyKind::kTranspose) continue;
    ++transposes;
    EXPECT_EQ(p.dst_strides[0], static_cast<int64_t>(element_size(dst_type)));
    EXPECT_EQ(p.src_strides[static_cast<size_t>(plan.src_fast_dim)],
              static_cast<int64_t>(element_size(src_type)));
    EXPECT_EQ(transpose_pairs(plan), naive_pairs(p));
    if (HasFailure()) return;
  }
  EXPECT_GT(transposes, 15) << "permuted copies planned as transposes, of 60";
}

TEST(CudaCopyPlan, LargeTransposesLoopOverTheGridLimits) {
  // A batch beyond the grid's z limit: 70000 batches of a 2 x 2 transpose.
  const Tensor src = empty({70000, 2, 2}).permute({0, 2, 1});
  Tensor dst = empty(src.sizes());
  const CopyProblem p = problem_of(dst, src);
  const CudaCopyPlan plan = plan_cuda_copy(p);
  ASSERT_EQ(plan.kind, CudaCopyKind::kTranspose) << plan.describe();
  EXPECT_EQ(plan.transpose.batch, 70000);
  EXPECT_EQ(plan.grid_z, cuda::kMaxGridZ);
  EXPECT_EQ(plan.describe(), "transpose (32x32 tiles, src fast dim 1, 70000 batches)");
  EXPECT_EQ(transpose_pairs(plan), naive_pairs(p));
}

}  // namespace
}  // namespace ferry::testing
