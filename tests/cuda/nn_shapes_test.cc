// The shape arithmetic of the CUDA nn kernels (ferry/backends/cuda/nn_shapes.h, welford.h), run
// without a GPU: merged-dim views against element-by-element walks, convolution output sizes,
// batch splits for cuDNN's 32-bit descriptors, the reduction splits, and Welford statistics
// combined in pieces against a two-pass computation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "ferry/backends/cuda/nn_shapes.h"
#include "ferry/backends/cuda/welford.h"
#include "tests/support/random.h"

namespace ferry::testing {
namespace {

using cuda::merge_dims;

// The offsets of dims [begin, end) walked row-major.
std::vector<int64_t> walk(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
                          int64_t begin, int64_t end) {
  std::vector<int64_t> out{0};
  for (int64_t d = begin; d < end; ++d) {
    std::vector<int64_t> next;
    for (int64_t base : out) {
      for (int64_t i = 0; i < sizes[static_cast<size_t>(d)]; ++i) {
        next.push_back(base + i * strides[static_cast<size_t>(d)]);
      }
    }
    out = next;
  }
  return out;
}

TEST(CudaNnShapes, MergedDimsWalkTheSameElements) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  int merged = 0;
  for (int trial = 0; trial < 500; ++trial) {
    const int ndim = 1 + static_cast<int>(rng() % 4);
    std::vector<int64_t> sizes, strides(static_cast<size_t>(ndim));
    for (int d = 0; d < ndim; ++d) sizes.push_back(1 + static_cast<int64_t>(rng() % 3));
    int64_t step = 1;
    for (int d = ndim - 1; d >= 0; --d) {
      strides[static_cast<size_t>(d)] = rng() % 5 == 0 ? 1 + static_cast<int64_t>(rng() % 9) : step;
      step = strides[static_cast<size_t>(d)] * sizes[static_cast<size_t>(d)];
    }
    const int64_t begin = static_cast<int64_t>(rng() % static_cast<uint64_t>(ndim + 1));
    const int64_t end =
        begin + static_cast<int64_t>(rng() % static_cast<uint64_t>(ndim - begin + 1));
    const auto m = merge_dims(sizes, strides, begin, end);
    if (!m) continue;
    ++merged;
    std::vector<int64_t> expected;
    for (int64_t i = 0; i < m->size; ++i) expected.push_back(i * m->stride);
    EXPECT_EQ(walk(sizes, strides, begin, end), expected) << "trial " << trial;
  }
  EXPECT_GT(merged, 100);
  // Size-1 dims never stand in the way; an empty range is (1, 1).
  EXPECT_EQ(merge_dims({2, 1, 3}, {3, 99, 1}, 0, 3)->size, 6);
  EXPECT_EQ(merge_dims({2, 3}, {3, 1}, 1, 1)->size, 1);
  EXPECT_FALSE(merge_dims({2, 3}, {1, 2}, 0, 2).has_value());  // transposed
}

TEST(CudaNnShapes, ConvolutionOutputSizes) {
  EXPECT_EQ(cuda::conv_output_size(224, 7, 2, 3, 1), 112);  // ResNet's stem
  EXPECT_EQ(cuda::conv_output_size(56, 3, 1, 1, 1), 56);
  EXPECT_EQ(cuda::conv_output_size(56, 1, 2, 0, 1), 28);
  EXPECT_EQ(cuda::conv_output_size(10, 3, 1, 0, 2), 6);  // dilated span 5
  EXPECT_EQ(cuda::conv_output_size(2, 3, 1, 0, 1), 0);   // does not fit
}

TEST(CudaNnShapes, SamplesPerCallKeepTensorsUnder32Bits) {
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  EXPECT_EQ(cuda::samples_per_call(64, {3 * 224 * 224, 64 * 112 * 112}), 64);
  const int64_t big = int64_t{1} << 28;  // elements per sample
  EXPECT_EQ(cuda::samples_per_call(64, {big}), kMax / big);
  EXPECT_EQ(cuda::samples_per_call(64, {kMax + 1}), 0);
  EXPECT_EQ(cuda::samples_per_call(5, {0}), 5);
  EXPECT_EQ(cuda::samples_per_call(0, {10}), 0);
}

TEST(CudaNnShapes, SplitsFillTheDeviceButKeepWorkPerThread) {
  EXPECT_EQ(cuda::splits_for(64, 1000, 256, 432), 1);             // little work: no split
  EXPECT_EQ(cuda::splits_for(3, 64 * 224 * 224, 256, 432), 144);  // few channels, much work
  EXPECT_EQ(cuda::splits_for(1000, 1 << 20, 256, 432), 1);        // enough blocks already
  EXPECT_EQ(cuda::splits_for(1, int64_t{1} << 40, 256, int64_t{1} << 20), 65535);
}

TEST(CudaNnShapes, WelfordPiecesMatchTwoPasses) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  std::normal_distribution<double> normal(3.0, 2.0);
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<double> v(1 + rng() % 300);
    for (double& x : v) x = normal(rng);
    double mean = 0;
    for (double x : v) mean += x;
    mean /= static_cast<double>(v.size());
    double m2 = 0;
    for (double x : v) m2 += (x - mean) * (x - mean);
    // Threads each take a strided share, then combine as a block's tree and the splits do.
    const size_t lanes = 1 + rng() % 8;
    std::vector<cuda::Welford<double>> parts(lanes);
    for (size_t i = 0; i < v.size(); ++i) parts[i % lanes].add(v[i]);
    cuda::Welford<double> all;
    for (const auto& p : parts) all = cuda::welford_combine(all, p);
    EXPECT_EQ(all.count, static_cast<int64_t>(v.size()));
    EXPECT_NEAR(all.mean, mean, 1e-12);
    EXPECT_NEAR(all.variance(), m2 / static_cast<double>(v.size()), 1e-10);
  }
  const cuda::Welford<float> empty;
  EXPECT_EQ(cuda::welford_combine(empty, empty).count, 0);
  EXPECT_EQ(empty.variance(), 0.0F);
}

}  // namespace
}  // namespace ferry::testing
