// copy_ against the naive oracle (naive_copy.h) on random problems: ranks 0-6, sizes with 0 and
// 1, permutations, stepped slices, broadcast sources, all 196 dtype pairs, conj/neg bits on
// either side, 1 and 2 threads; for every pair also sizes of 8-40 (the tile transpose) and now
// and then a problem that splits across 2 threads; plus large problems of the named layouts,
// and the CPU reference kernel checked on its own. The seed is printed on failure.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ferry/backends/cpu/copy_kernel.h"
#include "ferry/backends/cpu/copy_reference.h"
#include "ferry/backends/cpu/copy_tuning.h"
#include "ferry/ferry.h"
#include "ferry/iter/parallel.h"
#include "tests/ops/naive_copy.h"
#include "tests/support/random.h"

namespace ferry {
namespace {

using testing::check_copy;
using testing::fill_random;
using testing::random_view;
using testing::storage_bytes;

constexpr ScalarType kAllTypes[] = {kBool,      kUInt8,      kInt8,          kInt16,      kInt32,
                                    kInt64,     kFloat16,    kBFloat16,      kFloat32,    kFloat64,
                                    kComplex64, kComplex128, kFloat8_e4m3fn, kFloat8_e5m2};
static_assert(std::size(kAllTypes) == kNumScalarTypes);

class CopyRandom : public ::testing::Test {
 protected:
  void SetUp() override { saved_threads_ = get_num_threads(); }
  void TearDown() override { set_num_threads(saved_threads_); }
  int saved_threads_ = 1;
};

// Random sizes of rank 0-6 with at most `max_numel` elements; sizes 0 and 1 are common.
DimVector random_sizes(std::mt19937_64& rng, int64_t max_numel) {
  while (true) {
    const auto rank = static_cast<size_t>(rng() % 7);
    DimVector sizes(rank);
    int64_t numel = 1;
    for (auto& s : sizes) {
      const uint64_t r = rng() % 20;
      s = r == 0 ? 0 : r < 6 ? 1 : 2 + static_cast<int64_t>(rng() % 6);
      numel *= s;
    }
    if (numel <= max_numel) return sizes;
  }
}

// Random sizes of rank 1-3 with between `min_numel` and 2 * min_numel elements.
DimVector random_large_sizes(std::mt19937_64& rng, int64_t min_numel) {
  while (true) {
    const auto rank = 1 + static_cast<size_t>(rng() % 3);
    const auto cap = static_cast<uint64_t>(2 * std::pow(2.0 * min_numel, 1.0 / rank));
    DimVector sizes(rank);
    int64_t numel = 1;
    for (auto& s : sizes) {
      s = 1 + static_cast<int64_t>(rng() % cap);
      numel *= s;
    }
    if (numel >= min_numel && numel <= 2 * min_numel) return sizes;
  }
}

// Rank 2-4 with two dimensions of 8-40 and the others 1-3: long enough on both sides for the tile
// transpose (kMinTransposeSide) when random_case gives dst and src different fastest dims.
DimVector random_medium_sizes(std::mt19937_64& rng) {
  static_assert(cpu::tuning::kMinTransposeSide <= 8);
  const auto rank = 2 + static_cast<size_t>(rng() % 3);
  DimVector sizes(rank);
  for (auto& s : sizes) s = 1 + static_cast<int64_t>(rng() % 3);
  const size_t a = rng() % rank;
  const size_t b = (a + 1 + rng() % (rank - 1)) % rank;
  sizes[a] = 8 + static_cast<int64_t>(rng() % 33);
  sizes[b] = 8 + static_cast<int64_t>(rng() % 33);
  return sizes;
}

// The element count at which a copy between these dtypes moves enough bytes for plan_copy to
// give it 2 threads (kMinBytesPerThread each), with a little to spare.
int64_t two_thread_numel(ScalarType dst_type, ScalarType src_type) {
  const auto bytes = static_cast<int64_t>(element_size(dst_type) + element_size(src_type));
  return 2 * cpu::tuning::kMinBytesPerThread / bytes + 64;
}

cpu::CopyPlan plan_of(const Tensor& dst, const Tensor& src) {
  const TensorIterator iter =
      TensorIteratorConfig().add_output(dst).add_input(src).check_all_same_dtype(false).build();
  return cpu::plan_copy(copy_problem_from(iter));
}

Tensor with_random_bits(std::mt19937_64& rng, Tensor t) {
  if (t.is_complex() && rng() % 2 == 0) t = t.conj();
  if (rng() % 3 == 0) t = t._neg_view();
  return t;
}

struct Case {
  Tensor dst;
  Tensor src;
};

// dst and src with `sizes` (src possibly broadcast), random layouts and lazy bits.
Case random_case(std::mt19937_64& rng, ScalarType dst_type, ScalarType src_type, IntArrayRef sizes,
                 int64_t max_step = 3, bool allow_broadcast = true) {
  const uint64_t shape = rng() % 4;  // 0: both contiguous (the fast path), else random
  Tensor dst = random_view(rng, sizes, dst_type, false, shape == 0, max_step);
  Tensor src = random_view(rng, sizes, src_type, allow_broadcast && shape != 0 && rng() % 2 == 0,
                           shape == 0, max_step);
  fill_random(dst, rng);
  fill_random(src, rng);
  return {with_random_bits(rng, dst), with_random_bits(rng, src)};
}

std::string describe(const Case& c) {
  std::ostringstream out;
  out << "dst " << c.dst.dtype() << " sizes " << c.dst.sizes() << " strides " << c.dst.strides()
      << " offset " << c.dst.storage_offset() << " conj " << c.dst.is_conj() << " neg "
      << c.dst.is_neg() << "; src " << c.src.dtype() << " sizes " << c.src.sizes() << " strides "
      << c.src.strides() << " offset " << c.src.storage_offset() << " conj " << c.src.is_conj()
      << " neg " << c.src.is_neg() << "; threads " << get_num_threads();
  return out.str();
}

bool run_and_check(Case c) {
  const auto dst_before = storage_bytes(c.dst);
  const auto src_before = storage_bytes(c.src);
  Tensor& result = c.dst.copy_(c.src);
  EXPECT_TRUE(result.is_same(c.dst));
  return check_copy(c.dst, c.src, dst_before, src_before);
}

// One pair in this many (evenly spaced, from a random start) gets a problem large enough for 2
// threads (1 to 4 MiB of oracle work each): a dozen per run; sanitizer builds, ten times
// slower, get four.
#if defined(FERRY_SANITIZER_BUILD)
constexpr uint64_t kTwoThreadPairEvery = 48;
#else
constexpr uint64_t kTwoThreadPairEvery = 16;
#endif

TEST_F(CopyRandom, AllDtypePairs) {
  SCOPED_TRACE(testing::seed_trace());
  auto rng = testing::test_rng();
  int transposes = 0;
  int split = 0;
  int large = 0;
  uint64_t pair = rng() % kTwoThreadPairEvery;
  for (ScalarType dst_type : kAllTypes) {
    for (ScalarType src_type : kAllTypes) {
      for (int trial = 0; trial < 20; ++trial) {
        set_num_threads(1 + trial % 2);
        // Every fourth problem has sizes of 8-40, where the tile transpose starts.
        const bool medium = trial % 4 == 3;
        const Case c = random_case(rng, dst_type, src_type,
                                   medium ? random_medium_sizes(rng) : random_sizes(rng, 300));
        SCOPED_TRACE(describe(c));
        if (medium) transposes += plan_of(c.dst, c.src).kind == cpu::CopyKernelKind::Transpose;
        ASSERT_TRUE(run_and_check(c));
      }
      if (++pair % kTwoThreadPairEvery == 0) {
        set_num_threads(2);
        ++large;
        // Not broadcast: a broadcast source is not read per element, so it counts less traffic.
        const Case c = random_case(rng, dst_type, src_type,
                                   random_large_sizes(rng, two_thread_numel(dst_type, src_type)),
                                   /*max_step=*/2, /*allow_broadcast=*/false);
        SCOPED_TRACE(describe(c));
        const cpu::CopyPlan plan = plan_of(c.dst, c.src);
        EXPECT_EQ(plan.threads, 2) << plan.describe();
        split += plan.threads == 2;
        ASSERT_TRUE(run_and_check(c));
      }
    }
  }
  // The draws reached the kernels they are there for (else the test would prove less than it
  // says): about a quarter of the medium problems have differing fastest dims.
  EXPECT_GT(transposes, 50);
  EXPECT_GE(large, static_cast<int>(kNumScalarTypes * kNumScalarTypes / kTwoThreadPairEvery));
  EXPECT_EQ(split, large);
}

TEST_F(CopyRandom, LargeCopiesSplitAcrossThreads) {
  SCOPED_TRACE(testing::seed_trace());
  auto rng = testing::test_rng();
  for (int trial = 0; trial < 8; ++trial) {
    set_num_threads(1 + trial % 2);
    const ScalarType dst_type = kAllTypes[rng() % kNumScalarTypes];
    const ScalarType src_type = kAllTypes[rng() % kNumScalarTypes];
    // Past the kernels' per-thread minimum (copy_tuning.h), so that two threads split it.
    const Case c =
        random_case(rng, dst_type, src_type, random_large_sizes(rng, 150000), /*max_step=*/2);
    SCOPED_TRACE(describe(c));
    ASSERT_TRUE(run_and_check(c));
  }
}

// Large layouts that matter for the kernels: transposes, channels-last, broadcasts.
TEST_F(CopyRandom, LargeNamedLayouts) {
  SCOPED_TRACE(testing::seed_trace());
  auto rng = testing::test_rng();
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    // Big enough that the planner splits it: the threaded kernels are exercised for sure.
    Tensor big = empty({1024, 1024});
    fill_random(big, rng);
    Tensor big_t = empty({1024, 1024}, kBFloat16);
    const Tensor big_src = big.t();
    const TensorIterator iter = TensorIteratorConfig()
                                    .add_output(big_t)
                                    .add_input(big_src)
                                    .check_all_same_dtype(false)
                                    .build();
    EXPECT_EQ(cpu::plan_copy(copy_problem_from(iter)).threads, threads);
    ASSERT_TRUE(run_and_check({big_t, big_src}));
    for (ScalarType dst_type : {kFloat32, kBFloat16, kFloat64, kInt8}) {
      Tensor src = empty({333, 257});
      fill_random(src, rng);
      Tensor t = empty({257, 333}, dst_type);
      ASSERT_TRUE(run_and_check({t, src.t()}));
      Tensor nchw = empty({2, 24, 19, 21});
      fill_random(nchw, rng);
      Tensor nhwc =
          empty({2, 24, 19, 21}, TensorOptions(dst_type).memory_format(MemoryFormat::ChannelsLast));
      ASSERT_TRUE(run_and_check({nhwc, nchw}));
      Tensor col = empty({300, 1}, kFloat64);
      fill_random(col, rng);
      ASSERT_TRUE(run_and_check({empty({300, 200}, dst_type), col.expand({300, 200})}));
    }
  }
}

// The reference kernel on its own (the yardstick of the tuned kernels): iterator, CopyProblem,
// run_copy_reference, against the oracle.
TEST_F(CopyRandom, ReferenceKernelMatchesTheOracle) {
  SCOPED_TRACE(testing::seed_trace());
  auto rng = testing::test_rng();
  for (int trial = 0; trial < 400; ++trial) {
    const Case c = random_case(rng, kAllTypes[rng() % kNumScalarTypes],
                               kAllTypes[rng() % kNumScalarTypes], random_sizes(rng, 300));
    SCOPED_TRACE(describe(c));
    const auto dst_before = storage_bytes(c.dst);
    const auto src_before = storage_bytes(c.src);
    TensorIterator iter = TensorIteratorConfig()
                              .add_output(c.dst)
                              .add_input(c.src)
                              .resize_outputs(false)
                              .check_all_same_dtype(false)
                              .build();
    if (iter.numel() > 0) cpu::run_copy_reference(copy_problem_from(iter));
    ASSERT_TRUE(check_copy(c.dst, c.src, dst_before, src_before));
  }
}

}  // namespace
}  // namespace ferry
