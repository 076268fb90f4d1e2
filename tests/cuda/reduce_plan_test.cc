// The CUDA reduction kernel's host-side plan and combine rules (ferry/backends/cuda/reduce_plan.h),
// run without a GPU: the geometry's offsets reproduce a naive walk of every (output, reduced
// element) pair; the launch's threads visit each pair exactly once; and the combines give the CPU
// kernel's sequential results (NaN wins amax; argmax's first maximum and first NaN) under any
// grouping, as a block's tree and the splits produce.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "ferry/backends/cuda/reduce_plan.h"
#include "tests/support/random.h"

namespace ferry::testing {
namespace {

using cuda::ArgmaxValue;
using cuda::ReduceArgmax;
using cuda::ReduceMax;
using cuda::ReduceSum;

// (output byte offset) -> sorted input byte offsets, the naive way.
std::map<int64_t, std::vector<int64_t>> naive_pairs(const std::vector<int64_t>& sizes,
                                                    const std::vector<int64_t>& in_strides,
                                                    const std::vector<int64_t>& out_strides,
                                                    const std::set<int64_t>& dims, int64_t ie,
                                                    int64_t oe) {
  std::map<int64_t, std::vector<int64_t>> out;
  std::vector<int64_t> idx(sizes.size(), 0);
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;
  for (int64_t i = 0; i < numel; ++i) {
    int64_t in = 0, o = 0;
    for (size_t d = 0; d < sizes.size(); ++d) {
      in += idx[d] * in_strides[d] * ie;
      if (!dims.count(static_cast<int64_t>(d))) o += idx[d] * out_strides[d] * oe;
    }
    out[o].push_back(in);
    for (size_t d = sizes.size(); d-- > 0;) {
      if (++idx[d] < sizes[d]) break;
      idx[d] = 0;
    }
  }
  for (auto& [o, v] : out) std::sort(v.begin(), v.end());
  return out;
}

std::map<int64_t, std::vector<int64_t>> planned_pairs(const cuda::ReduceGeometry& g) {
  const int64_t* ks[2] = {g.kept_strides[0].data(), g.kept_strides[1].data()};
  const int64_t* rs[1] = {g.red_strides[0].data()};
  const OffsetCalculator<2, uint64_t> kept(static_cast<int>(g.kept_sizes.size()),
                                           g.kept_sizes.data(), ks);
  const OffsetCalculator<1, uint64_t> red(static_cast<int>(g.red_sizes.size()), g.red_sizes.data(),
                                          rs);
  std::map<int64_t, std::vector<int64_t>> out;
  for (int64_t o = 0; o < g.outputs; ++o) {
    const auto k = kept.get(static_cast<uint64_t>(o));
    auto& v = out[static_cast<int64_t>(k.at[1])];
    EXPECT_TRUE(v.empty()) << "two outputs share offset " << k.at[1];
    for (int64_t r = 0; r < g.reduced; ++r) {
      v.push_back(static_cast<int64_t>(k.at[0] + red.get(static_cast<uint64_t>(r)).at[0]));
    }
    std::sort(v.begin(), v.end());
  }
  return out;
}

TEST(CudaReducePlan, GeometryReproducesTheNaiveWalk) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  for (int trial = 0; trial < 300; ++trial) {
    const int ndim = static_cast<int>(rng() % 5);
    std::vector<int64_t> sizes;
    for (int d = 0; d < ndim; ++d) sizes.push_back(1 + static_cast<int64_t>(rng() % 4));
    // Input: a random permutation of dense strides, sometimes with gaps or a broadcast dim.
    std::vector<int> perm(static_cast<size_t>(ndim));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    std::vector<int64_t> in_strides(static_cast<size_t>(ndim));
    int64_t step = 1;
    for (int d : perm) {
      in_strides[static_cast<size_t>(d)] = rng() % 7 == 0 ? 0 : step;
      step *= sizes[static_cast<size_t>(d)] + static_cast<int64_t>(rng() % 2);
    }
    std::set<int64_t> dims;
    for (int d = 0; d < ndim; ++d) {
      if (rng() % 2) dims.insert(d);
    }
    // Output: dense row-major over the kept sizes (size 1 on the reduced dims).
    std::vector<int64_t> out_strides(static_cast<size_t>(ndim));
    step = 1;
    for (int d = ndim - 1; d >= 0; --d) {
      out_strides[static_cast<size_t>(d)] = step;
      if (!dims.count(d)) step *= sizes[static_cast<size_t>(d)];
    }
    const std::vector<int64_t> dim_list(dims.begin(), dims.end());
    const cuda::ReduceGeometry g =
        cuda::plan_reduce_geometry(sizes, in_strides, out_strides, dim_list, 2, 8);
    int64_t outputs = 1, reduced = 1;
    for (int d = 0; d < ndim; ++d)
      (dims.count(d) ? reduced : outputs) *= sizes[static_cast<size_t>(d)];
    EXPECT_EQ(g.outputs, outputs);
    EXPECT_EQ(g.reduced, reduced);
    EXPECT_EQ(planned_pairs(g), naive_pairs(sizes, in_strides, out_strides, dims, 2, 8))
        << "trial " << trial;
  }
}

TEST(CudaReducePlan, OrdersTheFastestDimFirstAndMerges) {
  // [4, 6] row-major, reduce dim 1: rows are outputs, the reduced dim is the fastest.
  cuda::ReduceGeometry g = cuda::plan_reduce_geometry({4, 6}, {6, 1}, {1, 1}, {1}, 4, 4);
  EXPECT_TRUE(g.reduce_fastest);
  EXPECT_EQ(g.red_sizes, (std::vector<int64_t>{6}));
  // Reduce dim 0: neighbouring outputs are neighbours in memory.
  g = cuda::plan_reduce_geometry({4, 6}, {6, 1}, {6, 1}, {0}, 4, 4);
  EXPECT_FALSE(g.reduce_fastest);
  // All dims of a contiguous [2, 3, 4] merge into one reduced dim.
  g = cuda::plan_reduce_geometry({2, 3, 4}, {12, 4, 1}, {1, 1, 1}, {0, 1, 2}, 4, 4);
  EXPECT_EQ(g.red_sizes, (std::vector<int64_t>{24}));
  EXPECT_TRUE(g.kept_sizes.empty());
  EXPECT_EQ(g.outputs, 1);
  // An empty reduction walks nothing: no zero-sized dim reaches an OffsetCalculator.
  g = cuda::plan_reduce_geometry({3, 0}, {1, 1}, {1, 1}, {1}, 4, 4);
  EXPECT_EQ(g.reduced, 0);
  EXPECT_EQ(g.outputs, 3);
  EXPECT_TRUE(g.red_sizes.empty());
}

// Every (output, reduced index) pair exactly once, as the kernel's loops visit them.
void check_launch_cover(int64_t outputs, int64_t reduced, bool fastest, int64_t target) {
  const cuda::ReduceLaunch l = cuda::plan_reduce_launch(outputs, reduced, fastest, 256, target);
  ASSERT_EQ(l.lanes_out * l.lanes_reduce, 256);
  ASSERT_GE(l.splits, 1);
  ASSERT_LE(l.splits, 65535);
  std::vector<int> seen(static_cast<size_t>(outputs * reduced), 0);
  for (int64_t block = 0; block < l.out_blocks; ++block) {
    for (int split = 0; split < l.splits; ++split) {
      for (int lo = 0; lo < l.lanes_out; ++lo) {
        for (int lr = 0; lr < l.lanes_reduce; ++lr) {
          const cuda::ReduceThreadWork w = cuda::reduce_thread_work(
              l.lanes_reduce, l.lanes_out, l.per_split, reduced, block, split, lo, lr);
          if (w.output >= outputs) continue;
          for (int64_t r = w.begin; r < w.end; r += w.step) {
            ++seen[static_cast<size_t>(w.output * reduced + r)];
          }
        }
      }
    }
  }
  for (size_t i = 0; i < seen.size(); ++i) {
    ASSERT_EQ(seen[i], 1) << "output " << i / static_cast<size_t>(reduced) << ", element "
                          << i % static_cast<size_t>(reduced) << " (outputs " << outputs
                          << ", reduced " << reduced << ", splits " << l.splits << ")";
  }
}

TEST(CudaReducePlan, LaunchCoversEveryPairOnce) {
  for (bool fastest : {true, false}) {
    for (int64_t outputs : {1, 3, 31, 33, 300}) {
      for (int64_t reduced : {0, 1, 5, 255, 257, 10000}) {
        check_launch_cover(outputs, reduced, fastest, 432);
      }
    }
  }
  // Many splits for one large reduction.
  check_launch_cover(1, 1 << 20, true, 432);
  const cuda::ReduceLaunch l = cuda::plan_reduce_launch(1, 1 << 20, true, 256, 432);
  EXPECT_EQ(l.splits, 256);  // 2^20 / (256 * 16): each thread keeps 16 elements
  EXPECT_EQ(cuda::plan_reduce_launch(100000, 1 << 20, true, 256, 432).splits, 1);
}

// The CPU kernel's sequential rules.
double cpu_amax(const std::vector<double>& v) {
  double best = 0;
  bool first = true;
  for (double x : v) {
    if (std::isnan(best)) break;
    if (first || std::isnan(x) || x > best) best = x;
    first = false;
  }
  return best;
}
int64_t cpu_argmax(const std::vector<double>& v) {
  double best = 0;
  int64_t best_index = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(v[i])) return static_cast<int64_t>(i);
    if (i == 0 || v[i] > best) {
      best = v[i];
      best_index = static_cast<int64_t>(i);
    }
  }
  return best_index;
}

// Combines lifted values in a random binary tree over a random split into contiguous pieces
// (what the splits and the block trees do: any grouping, the index carried along).
template <typename Op>
typename Op::Value tree_reduce(const std::vector<double>& v, std::mt19937_64& rng) {
  std::vector<typename Op::Value> level;
  for (size_t i = 0; i < v.size(); ++i) level.push_back(Op::lift(v[i], static_cast<int64_t>(i)));
  std::shuffle(level.begin(), level.end(), rng);  // lanes see elements in any order
  while (level.size() > 1) {
    std::vector<typename Op::Value> next;
    for (size_t i = 0; i + 1 < level.size(); i += 2)
      next.push_back(Op::combine(level[i], level[i + 1]));
    if (level.size() % 2) next.push_back(Op::combine(level.back(), Op::identity()));
    level = std::move(next);
  }
  return level.empty() ? Op::identity() : level[0];
}

TEST(CudaReducePlan, CombinesMatchTheCpuRules) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const double pool[] = {nan, -inf, inf, 0.0, -0.0, 1.0, 1.0, 2.0, -3.0};
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<double> v(1 + rng() % 9);
    for (double& x : v) x = pool[rng() % (trial % 2 ? 9 : 8) + (trial % 2 ? 0 : 1)];
    const double amax = tree_reduce<ReduceMax<double>>(v, rng);
    const double expected = cpu_amax(v);
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(amax));
    } else {
      EXPECT_EQ(amax, expected);
    }
    const ArgmaxValue<double> arg = tree_reduce<ReduceArgmax<double>>(v, rng);
    EXPECT_EQ(arg.index, cpu_argmax(v)) << "trial " << trial;
  }
  // Integers: the same rules without NaN.
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<double> v(1 + rng() % 9);
    for (double& x : v) x = static_cast<double>(static_cast<int>(rng() % 5) - 2);
    std::vector<typename ReduceArgmax<int64_t>::Value> lifted;
    auto best = ReduceArgmax<int64_t>::identity();
    std::vector<size_t> order(v.size());
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i : order) {
      best = ReduceArgmax<int64_t>::combine(
          best, ReduceArgmax<int64_t>::lift(static_cast<int64_t>(v[i]), static_cast<int64_t>(i)));
    }
    EXPECT_EQ(best.index, cpu_argmax(v));
  }
  EXPECT_EQ(ReduceSum<int64_t>::combine(ReduceSum<int64_t>::identity(), 5), 5);
  EXPECT_EQ(ReduceMax<int64_t>::identity(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(ReduceMax<double>::identity(), -inf);
}

TEST(CudaReducePlan, AccumulatesAsTheCpu) {
  static_assert(std::is_same_v<cuda::reduce_acc_t<float>, double>);
  static_assert(std::is_same_v<cuda::reduce_acc_t<Half>, double>);
  static_assert(std::is_same_v<cuda::reduce_acc_t<BFloat16>, double>);
  static_assert(std::is_same_v<cuda::reduce_acc_t<int8_t>, int64_t>);
  static_assert(std::is_same_v<cuda::reduce_acc_t<bool>, int64_t>);
}

}  // namespace
}  // namespace ferry::testing
