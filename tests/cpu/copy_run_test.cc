// run_copy against the naive oracle (copy_problem_gen.h) on random problems: every dtype pair,
// conj/neg, permuted/sliced/broadcast layouts, odd sizes and tile edges, misaligned pointers,
// 1 to 3 chunks, every plan kind forced, and each SIMD target this CPU supports (so the AVX2
// and portable paths run here too).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "ferry/backends/cpu/copy_plan.h"
#include "ferry/backends/cpu/simd.h"
#include "ferry/iter/parallel.h"
#include "tests/cpu/copy_problem_gen.h"
#include "tests/support/random.h"

namespace ferry::cpu {
namespace {

using testing::Buffer;

// Sanitizers slow the oracle down ten-fold; fewer problems keep the suite under a minute.
#if defined(FERRY_SANITIZER_BUILD)
constexpr int kRandomProblems = 60;
#else
constexpr int kRandomProblems = 150;
#endif

constexpr ScalarType kHotPairs[][2] = {
    {kFloat32, kFloat32},  {kBFloat16, kFloat32},    {kFloat16, kFloat32},
    {kFloat32, kBFloat16}, {kFloat32, kFloat16},     {kFloat64, kFloat32},
    {kFloat32, kFloat64},  {kFloat32, kInt32},       {kInt32, kFloat32},
    {kFloat64, kInt64},    {kInt64, kFloat64},       {kFloat32, kUInt8},
    {kFloat32, kBool},     {kBFloat16, kBFloat16},   {kUInt8, kUInt8},
    {kInt64, kInt64},      {kComplex64, kComplex64}, {kComplex128, kComplex128}};

// One problem with its buffers; runs the oracle and the kernels on separate copies of dst.
class Case {
 public:
  Case(std::mt19937_64& rng, const std::vector<int64_t>& shape, ScalarType dst_t, ScalarType src_t,
       bool conj, bool neg, bool canonical)
      : dst_view_(testing::random_view(rng, shape, false)),
        src_view_(testing::random_view(rng, shape, true)),
        dst_misalign_(rng() % 2 == 0 ? 0 : rng() % 64),
        src_(static_cast<size_t>(src_view_.extent) * element_size(src_t),
             rng() % 2 == 0 ? 0 : rng() % 64),
        before_(dst_misalign_ + static_cast<size_t>(dst_view_.extent) * element_size(dst_t)) {
    testing::fill_values(rng, src_t, src_.data(), src_view_.extent);
    for (auto& b : before_) b = static_cast<unsigned char>(rng());
    const auto ds = static_cast<int64_t>(element_size(dst_t));
    const auto ss = static_cast<int64_t>(element_size(src_t));
    for (size_t d = 0; d < shape.size(); ++d) {
      problem_.sizes.push_back(shape[d]);
      problem_.dst_strides.push_back(dst_view_.strides[d] * ds);
      problem_.src_strides.push_back(src_view_.strides[d] * ss);
    }
    problem_.src = reinterpret_cast<const char*>(src_.data()) + src_view_.offset * ss;
    problem_.dst_dtype = dst_t;
    problem_.src_dtype = src_t;
    problem_.conj = conj && is_complex(dst_t);
    problem_.neg = neg;
    if (canonical) testing::canonicalize(problem_);
  }

  const CopyProblem& problem() const { return problem_; }

  // The dst bytes (whole buffer) after the copy, by the oracle or by `plan`.
  std::vector<unsigned char> run(const CopyPlan* plan) {
    Buffer dst(before_.size() - dst_misalign_, dst_misalign_);
    dst.set_contents(before_);
    CopyProblem p = problem_;
    p.dst = reinterpret_cast<char*>(dst.data()) +
            dst_view_.offset * static_cast<int64_t>(element_size(p.dst_dtype));
    if (plan == nullptr) {
      testing::naive_copy(p);
    } else {
      run_copy(p, *plan);
    }
    return dst.contents();
  }

 private:
  CopyProblem problem_;
  testing::View dst_view_, src_view_;
  size_t dst_misalign_;
  Buffer src_;
  std::vector<unsigned char> before_;
};

// Runs the plan plan_copy picks, split 1, 2 and 3 ways, with ordinary and with streaming stores,
// and the Strided kernel (valid for every problem); each must equal the oracle byte for byte,
// outside the elements too.
void expect_matches_oracle(Case& c) {
  SCOPED_TRACE(testing::describe_problem(c.problem()));
  const std::vector<unsigned char> expected = c.run(nullptr);
  CopyPlan plan = plan_copy(c.problem());
  for (bool stream : {false, true}) {
    for (int threads : {1, 2, 3}) {
      plan.threads = threads;
      plan.stream = stream;
      SCOPED_TRACE(plan.describe());
      ASSERT_EQ(testing::first_difference(expected, c.run(&plan)), "");
    }
  }
  CopyPlan strided;
  ASSERT_EQ(testing::first_difference(expected, c.run(&strided)), "") << "Strided";
}

std::vector<int64_t> random_shape(std::mt19937_64& rng) {
  const size_t rank = rng() % 7;
  std::vector<int64_t> shape(rank);
  static constexpr int64_t kEdgy[] = {15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 129};
  int64_t numel = 1;
  for (auto& s : shape) {
    const uint64_t kind = rng() % 10;
    s = kind < 5   ? 1 + static_cast<int64_t>(rng() % 6)
        : kind < 8 ? kEdgy[rng() % std::size(kEdgy)]
        : kind < 9 ? static_cast<int64_t>(rng() % 300)
                   : static_cast<int64_t>(rng() % 2);
    numel *= std::max<int64_t>(s, 1);
  }
  // Keep the oracle fast: shrink the largest dims until at most ~60k elements.
  while (numel > 60000) {
    auto it = std::max_element(shape.begin(), shape.end());
    numel = numel / *it * (*it / 2);
    *it /= 2;
  }
  return shape;
}

class CopyRun : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_threads_ = get_num_threads();
    set_num_threads(2);
  }
  void TearDown() override {
    set_simd_target("");
    set_native_bf16(true);
    set_num_threads(saved_threads_);
  }
  int saved_threads_ = 1;
};

TEST_F(CopyRun, RandomProblemsMatchTheOracleOnEveryTarget) {
  SCOPED_TRACE(ferry::testing::seed_trace());
  auto rng = ferry::testing::test_rng();
  for (const std::string& target : simd_targets()) {
    set_simd_target(target);
    SCOPED_TRACE(target);
    for (int iter = 0; iter < kRandomProblems; ++iter) {
      ScalarType dst_t, src_t;
      if (rng() % 2 == 0) {
        const auto& pair = kHotPairs[rng() % std::size(kHotPairs)];
        dst_t = pair[0];
        src_t = pair[1];
      } else {
        dst_t = static_cast<ScalarType>(rng() % kNumScalarTypes);
        src_t = static_cast<ScalarType>(rng() % kNumScalarTypes);
      }
      Case c(rng, random_shape(rng), dst_t, src_t, rng() % 8 == 0, rng() % 8 == 0, rng() % 5 != 0);
      expect_matches_oracle(c);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

// Every dtype pair through each kernel kind: contiguous with a tail, a transpose with ragged
// edges, a broadcast column, a stride-2 gather and a strided destination.
TEST_F(CopyRun, EveryDtypePairThroughEveryKernelOnEveryTarget) {
  SCOPED_TRACE(ferry::testing::seed_trace());
  auto rng = ferry::testing::test_rng();
  const ScalarType all[] = {kBool,      kUInt8,      kInt8,          kInt16,      kInt32,
                            kInt64,     kFloat16,    kBFloat16,      kFloat32,    kFloat64,
                            kComplex64, kComplex128, kFloat8_e4m3fn, kFloat8_e5m2};
  for (const std::string& target : simd_targets()) {
    set_simd_target(target);
    SCOPED_TRACE(target);
    for (ScalarType dst_t : all) {
      for (ScalarType src_t : all) {
        const ScalarType d = dst_t, s = src_t;
        const auto ds = static_cast<int64_t>(element_size(d));
        const auto ss = static_cast<int64_t>(element_size(s));
        auto check = [&](std::vector<int64_t> sizes, std::vector<int64_t> dst_strides,
                         std::vector<int64_t> src_strides, CopyKernelKind kind) {
          const bool flags = rng() % 4 == 0;
          if (kind == CopyKernelKind::Memcpy &&
              (d != s || (flags && (d != kBool || is_complex(d))))) {
            kind = CopyKernelKind::Convert;
          }
          int64_t src_extent = 1, dst_extent = 1;
          for (size_t k = 0; k < sizes.size(); ++k) {
            src_extent += (sizes[k] - 1) * src_strides[k];
            dst_extent += (sizes[k] - 1) * dst_strides[k];
          }
          Buffer src(static_cast<size_t>(src_extent * ss), rng() % 64);
          testing::fill_values(rng, s, src.data(), src_extent);
          const size_t misalign = rng() % 3 == 0 ? rng() % 64 : 0;
          std::vector<unsigned char> before(misalign + static_cast<size_t>(dst_extent * ds));
          for (auto& b : before) b = static_cast<unsigned char>(rng());
          CopyProblem p;
          for (size_t k = 0; k < sizes.size(); ++k) {
            p.sizes.push_back(sizes[k]);
            p.dst_strides.push_back(dst_strides[k] * ds);
            p.src_strides.push_back(src_strides[k] * ss);
          }
          p.src = reinterpret_cast<const char*>(src.data());
          p.dst_dtype = d;
          p.src_dtype = s;
          p.conj = flags && is_complex(d);
          p.neg = flags;
          auto run = [&](const CopyPlan* plan) {
            Buffer dst(before.size() - misalign, misalign);
            dst.set_contents(before);
            p.dst = reinterpret_cast<char*>(dst.data());
            if (plan == nullptr) {
              testing::naive_copy(p);
            } else {
              run_copy(p, *plan);
            }
            return dst.contents();
          };
          SCOPED_TRACE(testing::describe_problem(p));
          const auto expected = run(nullptr);
          CopyPlan plan = plan_copy(p);
          EXPECT_EQ(copy_kernel_name(plan.kind), copy_kernel_name(kind));
          for (int threads : {1, 2}) {
            plan.threads = threads;
            plan.stream = threads == 2;  // both store modes
            ASSERT_EQ(testing::first_difference(expected, run(&plan)), "") << plan.describe();
          }
        };
        check({1037}, {1}, {1}, CopyKernelKind::Memcpy);
        check({37, 70}, {1, 37}, {70, 1}, CopyKernelKind::Transpose);
        check({67, 19}, {1, 67}, {0, 1}, CopyKernelKind::Broadcast);
        check({301, 3}, {1, 301}, {2, 700}, CopyKernelKind::Gather);
        check({45, 7}, {3, 200}, {1, 45}, CopyKernelKind::Strided);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

// float32 -> bfloat16 transposes, with the CPU's own conversion (AVX512_BF16, where this CPU
// has it) and without: the same bits as the oracle either way. Most tiles hold only ordinary
// values, among them rounding ties and values that round up to infinity; a few hold one value
// the instruction converts differently (a denormal, NaNs with a sign and a payload), and must
// convert the portable way.
// Fills p's src with random values (p.numel() elements, dense from p.src's buffer) and runs
// `plan` at 1, 2 and 3 threads (streaming stores at 2) into a dst buffer of dst_bytes, each run
// against the oracle's result. plan_of(p) makes the plan once p is complete.
template <class PlanOf>
void expect_runs_match_the_oracle(std::mt19937_64& rng, CopyProblem p, size_t dst_bytes,
                                  PlanOf&& plan_of) {
  const int64_t count = p.numel();
  const auto e = static_cast<int64_t>(element_size(p.src_dtype));
  Buffer src(static_cast<size_t>(count * e), 0);
  testing::fill_values(rng, p.src_dtype, src.data(), count);
  p.src = reinterpret_cast<const char*>(src.data());
  Buffer expected(dst_bytes, 0), got(dst_bytes, 0);
  p.dst = reinterpret_cast<char*>(expected.data());
  testing::naive_copy(p);
  CopyPlan plan = plan_of(p);
  for (int threads : {1, 2, 3}) {
    plan.threads = threads;
    plan.stream = threads == 2;
    SCOPED_TRACE(testing::describe_problem(p) + ", " + std::to_string(threads) + " threads, " +
                 plan.describe());
    p.dst = reinterpret_cast<char*>(got.data());
    std::memset(got.data(), 0, dst_bytes);
    run_copy(p, plan);
    ASSERT_EQ(testing::first_difference(expected.contents(), got.contents()), "");
  }
}

// Gathers of runs shorter than a tile side from src rows contiguous along dim 1 (NCHW -> NHWC
// with a few channels: Note [narrow gathers] in copy_run.cc), every element size and run length
// around the kernel's limits, into packed and padded dst rows, split 1 to 3 ways, with ordinary
// and streaming stores.
TEST_F(CopyRun, NarrowGathersMatchTheOracle) {
  SCOPED_TRACE(ferry::testing::seed_trace());
  auto rng = ferry::testing::test_rng();
  for (ScalarType t : {kUInt8, kInt16, kFloat32, kFloat64, kComplex128}) {
    const auto e = static_cast<int64_t>(element_size(t));
    for (int64_t n0 = 1; n0 <= 9; ++n0) {
      for (int64_t pad : {0, 1}) {
        const int64_t cols = 2500, outer = 3;  // cols: two whole chunks and a partial one
        CopyProblem p;
        p.sizes = {n0, cols, outer};
        p.src_strides = {cols * e, e, n0 * cols * e};
        p.dst_strides = {e, (n0 + pad) * e, (n0 + pad) * cols * e};
        p.dst_dtype = p.src_dtype = t;
        const auto dst_bytes = static_cast<size_t>((n0 + pad) * cols * outer * e);
        expect_runs_match_the_oracle(rng, p, dst_bytes, [&](const CopyProblem& q) {
          const CopyPlan plan = plan_copy(q);
          if (n0 > 1) {
            EXPECT_EQ(plan.kind, n0 < 8 ? CopyKernelKind::Gather : CopyKernelKind::Transpose);
          }
          return plan;
        });
      }
    }
  }
}

// Runs along dim 0 gathered from src tuples of 2-4 elements along another dim k (NHWC -> NCHW
// with a few channels, k = 1; pixel unshuffle, k = 2 under a dim of rows: Note [narrow scatters]
// in copy_run.cc), every element size, tuple sizes around the kernel's, runs of 5 pixels (less
// than a vector), 17 and 28 (a last vector overlapping the one before) and 2500 (two whole chunks
// and a partial one), 3 rows or 40 (each plane's rows one run of whole lines to stream, over
// several of the kernel's buffers), into packed and padded dst rows, split 1 to 3 ways, with
// ordinary and streaming stores.
TEST_F(CopyRun, NarrowScattersMatchTheOracle) {
  SCOPED_TRACE(ferry::testing::seed_trace());
  auto rng = ferry::testing::test_rng();
  for (ScalarType t : {kUInt8, kInt16, kFloat32, kFloat64, kComplex128}) {
    const auto e = static_cast<int64_t>(element_size(t));
    for (int64_t planes = 1; planes <= 5; ++planes) {
      for (int64_t pixels : {5, 17, 28, 2500}) {
        for (int k : {1, 2, 3}) {
          // k = 3: dim 2 of 40 rows, dim 1 of 3 (k = 2's layout with 40 rows).
          const int64_t pad = rng() % 2, rows = k == 3 ? 40 : 3, outer = 2;
          if (k == 3 && pixels > 28) continue;
          CopyProblem p;
          const int64_t tuple = planes * e, row = pixels * tuple;
          if (k == 1) {
            p.sizes = {pixels, planes, outer};
            p.src_strides = {tuple, e, row};
            p.dst_strides = {e, (pixels + pad) * e, planes * (pixels + pad) * e};
          } else {
            p.sizes = {pixels, rows, planes, outer};
            p.src_strides = {tuple, row, e, rows * row};
            p.dst_strides = {e, (pixels + pad) * e, rows * (pixels + pad) * e,
                             planes * rows * (pixels + pad) * e};
          }
          if (k == 3) {  // the planes' rows of 40 along dim 1, a dim of 3 above them
            p.sizes = {pixels, rows, 3, planes, outer};
            p.src_strides = {tuple, 3 * row, row, e, 3 * rows * row};
            p.dst_strides = {e, (pixels + pad) * e, rows * (pixels + pad) * e,
                             3 * rows * (pixels + pad) * e, 3 * planes * rows * (pixels + pad) * e};
          }
          p.dst_dtype = p.src_dtype = t;
          // Streaming at 2 threads: rows of 2500 pixels stream, and so do 40 rows that are one
          // run of 1 KiB or more in each plane; other rows do not.
          const auto dst_bytes = static_cast<size_t>(p.numel() / pixels * (pixels + pad) * e);
          expect_runs_match_the_oracle(rng, p, dst_bytes,
                                       [](const CopyProblem& q) { return plan_copy(q); });
        }
      }
    }
  }
}

// Short runs along dim 0 whose src neighbours along dim 2 are adjacent, rows of dim 1 far apart
// (permute(1, 0, 2) of short rows: Note [short-run blocks] in copy_run.cc): run lengths of 4 to 64
// bytes (the sizes with their own copy and others), blocks along dim 2 whole and partial, an outer
// dim, split 1 to 3 ways.
TEST_F(CopyRun, ShortRunBlocksMatchTheOracle) {
  SCOPED_TRACE(ferry::testing::seed_trace());
  auto rng = ferry::testing::test_rng();
  for (ScalarType t : {kUInt8, kFloat32, kFloat64}) {
    const auto e = static_cast<int64_t>(element_size(t));
    for (int64_t run : {4, 12, 16, 32, 48, 64}) {
      if (run % e != 0) continue;
      const int64_t n0 = run / e, rows = 37, cols = 21, outer = 2;
      CopyProblem p;
      p.sizes = {n0, rows, cols, outer};
      p.src_strides = {e, cols * run, run, rows * cols * run};  // src [outer, rows, cols, n0]
      p.dst_strides = {e, run, rows * run, cols * rows * run};  // dst [outer, cols, rows, n0]
      p.dst_dtype = p.src_dtype = t;
      expect_runs_match_the_oracle(rng, p, static_cast<size_t>(p.numel() * e),
                                   [](const CopyProblem& q) {
                                     const CopyPlan plan = plan_copy(q);
                                     EXPECT_EQ(plan.kind, CopyKernelKind::Memcpy);
                                     return plan;
                                   });
    }
  }
}

// Permutations of 5 and 6 dims of a few to 20 elements each (tiles and ragged edges), whose dst
// rows get less than two lines per block or more (Note [transpose outer order] in copy_run.cc),
// small enough for ordinary stores, so that consecutive units go to the kernel as one repeated
// block (Note [small transposes]); same dtype and converting, split 1 to 3 ways.
TEST_F(CopyRun, ManyDimTransposesMatchTheOracle) {
  SCOPED_TRACE(ferry::testing::seed_trace());
  auto rng = ferry::testing::test_rng();
  const ScalarType pairs[][2] = {{kUInt8, kUInt8},     {kBFloat16, kBFloat16}, {kFloat32, kFloat32},
                                 {kFloat64, kFloat64}, {kBFloat16, kFloat32},  {kFloat32, kInt32}};
  int transposes = 0;
  for (int trial = 0; trial < 24; ++trial) {
    const auto& [dst_t, src_t] = pairs[trial % std::size(pairs)];
    const int nd = 5 + trial % 2;
    // dst contiguous over sizes; src contiguous over sizes permuted by perm (src dim order).
    DimVector sizes;
    for (int d = 0; d < nd; ++d) sizes.push_back(2 + static_cast<int64_t>(rng() % 5));
    sizes[0] = 8 + static_cast<int64_t>(rng() % 13);  // dst's contiguous dim: tiles and an edge
    std::vector<int> perm(static_cast<size_t>(nd));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    if (perm[static_cast<size_t>(nd) - 1] == 0)
      std::swap(perm[0], perm[static_cast<size_t>(nd) - 1]);
    sizes[static_cast<size_t>(perm[static_cast<size_t>(nd) - 1])] =
        8 + static_cast<int64_t>(rng() % 13);
    CopyProblem p;
    p.sizes = sizes;
    p.dst_dtype = dst_t;
    p.src_dtype = src_t;
    const auto de = static_cast<int64_t>(element_size(dst_t));
    const auto se = static_cast<int64_t>(element_size(src_t));
    p.dst_strides.resize(sizes.size());
    p.src_strides.resize(sizes.size());
    int64_t dst_stride = de, src_stride = se;
    for (int d = 0; d < nd; ++d) {
      p.dst_strides[static_cast<size_t>(d)] = dst_stride;
      dst_stride *= sizes[static_cast<size_t>(d)];
    }
    for (int k = nd - 1; k >= 0; --k) {  // perm's last dim is src's contiguous one
      const auto d = static_cast<size_t>(perm[static_cast<size_t>(k)]);
      p.src_strides[d] = src_stride;
      src_stride *= sizes[d];
    }
    SCOPED_TRACE(testing::describe_problem(p));
    expect_runs_match_the_oracle(rng, p, static_cast<size_t>(p.numel() * de),
                                 [&](const CopyProblem& q) {
                                   const CopyPlan plan = plan_copy(q);
                                   transposes += plan.kind == CopyKernelKind::Transpose;
                                   return plan;
                                 });
  }
  if (std::string(simd_target()) != "SCALAR") {
    EXPECT_GT(transposes, 12);
  }
}

// Narrow transposes whose src rows lie 512 KiB apart (a multiple of any L2's set span), so that
// they go block by block through buffers (Note [line-staged transposes] in copy_run.cc): a dim
// continuing dst's runs and another continuing src's, or one dim continuing both, sizes that
// chunk by 2, 4 or 8, same dtype and converting, on every target, split 1 to 3 ways, with
// ordinary and streaming stores.
// Runs p (src and dst set here) with plan at 1, 2 and 3 threads, streaming at 2, against the
// oracle: random values at the elements the copy reads, the rest of the extents zero.
void expect_plan_matches_the_oracle(std::mt19937_64& rng, CopyProblem p, CopyPlan plan) {
  const auto de = static_cast<int64_t>(element_size(p.dst_dtype));
  const auto se = static_cast<int64_t>(element_size(p.src_dtype));
  int64_t src_extent = se, dst_extent = de;
  for (int d = 0; d < p.ndim(); ++d) {
    src_extent += (p.sizes[d] - 1) * p.src_strides[d];
    dst_extent += (p.sizes[d] - 1) * p.dst_strides[d];
  }
  Buffer src(static_cast<size_t>(src_extent), 0);
  const int64_t n = p.numel();
  std::vector<unsigned char> values(static_cast<size_t>(n * se));
  testing::fill_values(rng, p.src_dtype, values.data(), n);
  for (int64_t e = 0; e < n; ++e) {
    int64_t offset = 0;
    for (int64_t d = 0, rest = e; d < p.ndim(); rest /= p.sizes[d], ++d) {
      offset += rest % p.sizes[d] * p.src_strides[d];
    }
    std::memcpy(src.data() + offset, values.data() + e * se, static_cast<size_t>(se));
  }
  p.src = reinterpret_cast<const char*>(src.data());
  Buffer expected(static_cast<size_t>(dst_extent), 0), got(static_cast<size_t>(dst_extent), 0);
  p.dst = reinterpret_cast<char*>(expected.data());
  testing::naive_copy(p);
  for (int threads : {1, 2, 3}) {
    plan.threads = threads;
    plan.stream = threads == 2;
    SCOPED_TRACE(std::to_string(threads) + " threads, " + plan.describe());
    p.dst = reinterpret_cast<char*>(got.data());
    std::memset(got.data(), 0, got.size());
    run_copy(p, plan);
    ASSERT_EQ(testing::first_difference(expected.contents(), got.contents()), "");
  }
}

TEST_F(CopyRun, LineStagedTransposesMatchTheOracle) {
  SCOPED_TRACE(ferry::testing::seed_trace());
  auto rng = ferry::testing::test_rng();
  constexpr int64_t kRowBytes = int64_t{512} << 10;
  const ScalarType pairs[][2] = {
      {kUInt8, kUInt8}, {kBFloat16, kBFloat16}, {kBFloat16, kFloat32}, {kFloat32, kFloat32}};
  for (const std::string& target : simd_targets()) {
    set_simd_target(target);
    SCOPED_TRACE(target);
    int staged = 0, fused_tiles = 0;
    for (int trial = 0; trial < 8; ++trial) {
      const auto& [dst_t, src_t] = pairs[trial % std::size(pairs)];
      const bool shared = trial >= 4;
      const auto de = static_cast<int64_t>(element_size(dst_t));
      const auto se = static_cast<int64_t>(element_size(src_t));
      // Dim 0 (dst's contiguous) and dim 1 (src's), one of them under two lines.
      int64_t m = rng() % 2 == 0 ? 16 : 32;
      const int64_t k = rng() % 2 == 0 ? 16 : 32;
      if (m * de >= 128 && k * se >= 128) m = 16;
      const int64_t chunked[] = {2, 6, 8};
      const int64_t a = chunked[rng() % 3], b = chunked[rng() % 3];
      CopyProblem p;
      p.dst_dtype = dst_t;
      p.src_dtype = src_t;
      if (shared) {
        // Dim 2 continues both: m elements apart in dst, k in src.
        p.sizes = {m, k, a};
        p.dst_strides = {de, m * a * de, m * de};
        p.src_strides = {kRowBytes, se, k * se};
      } else {
        // Dim 2 continues dst's runs, dim 3 src's.
        p.sizes = {m, k, a, b};
        p.dst_strides = {de, m * a * de, m * de, m * a * k * de};
        p.src_strides = {kRowBytes, se, k * b * se, k * se};
      }
      SCOPED_TRACE(testing::describe_problem(p));
      const CopyPlan plan = plan_copy(p);
      ASSERT_EQ(plan.kind, CopyKernelKind::Transpose);
      staged += plan.staged;
      fused_tiles += plan.route == TransposeRoute::kFused && plan.tile_rows > 0;
      expect_plan_matches_the_oracle(rng, p, plan);
    }
    // Staged wherever the tiles convert on the way: every trial on AVX-512 and AVX2.
    EXPECT_EQ(staged, fused_tiles);
    if (target.rfind("AVX", 0) == 0) {
      EXPECT_EQ(staged, 8);
    }
  }
}

// Sides that are odd multiples of the half tile's edge (Note [half tiles]): the whole tiles
// leave a side's last half edge (or all of it), which the half tiles take.
TEST_F(CopyRun, HalfTilesMatchTheOracle) {
  SCOPED_TRACE(ferry::testing::seed_trace());
  auto rng = ferry::testing::test_rng();
  // dst, src: the copies of every width, the conversions the tiles fuse, and conversions
  // through the buffer (converted first).
  const ScalarType pairs[][2] = {
      {kUInt8, kUInt8},      {kBFloat16, kBFloat16}, {kFloat32, kFloat32}, {kFloat64, kFloat64},
      {kBFloat16, kFloat32}, {kFloat32, kBFloat16},  {kFloat16, kFloat32}, {kFloat32, kFloat16},
      {kFloat32, kInt32},    {kFloat64, kFloat32},   {kFloat32, kUInt8}};
  constexpr int kTrials = 2 * static_cast<int>(std::size(pairs));
  for (const std::string& target : simd_targets()) {
    set_simd_target(target);
    SCOPED_TRACE(target);
    int with_half = 0;
    for (int trial = 0; trial < kTrials; ++trial) {
      const auto& [dst_t, src_t] = pairs[trial % std::size(pairs)];
      const bool shared = trial >= kTrials / 2;
      const auto de = static_cast<int64_t>(element_size(dst_t));
      const auto se = static_cast<int64_t>(element_size(src_t));
      CopyProblem route_of;
      route_of.dst_dtype = dst_t;
      route_of.src_dtype = src_t;
      const int64_t half =
          kernels::transpose_half_tile(transpose_tile_op(route_of, transpose_route(route_of)));
      // Odd multiples of the edge, at least the planner's shortest transpose side (8).
      const int64_t edge = half > 0 ? half : 8;
      const int64_t odd = (8 / edge) | 1;
      const int64_t m = (odd + 2 * static_cast<int64_t>(rng() % 2)) * edge;
      const int64_t k = (odd + 2 * static_cast<int64_t>(rng() % 2)) * edge;
      const int64_t a = 1 + static_cast<int64_t>(rng() % 16),
                    b = 1 + static_cast<int64_t>(rng() % 4);
      CopyProblem p;
      p.dst_dtype = dst_t;
      p.src_dtype = src_t;
      if (shared) {
        // Dim 2 continues both sides' runs (permute(3, 0, 5, 1, 4, 2)'s dim 1).
        p.sizes = {m, k, a};
        p.dst_strides = {de, m * a * de, m * de};
        p.src_strides = {k * a * se, se, k * se};
      } else {
        p.sizes = {m, k, a, b};
        p.dst_strides = {de, m * a * de, m * de, m * a * k * de};
        p.src_strides = {k * b * se, se, k * b * m * se, k * se};
      }
      SCOPED_TRACE(testing::describe_problem(p));
      const CopyPlan plan = plan_copy(p);
      ASSERT_EQ(plan.kind, CopyKernelKind::Transpose);
      EXPECT_EQ(plan.half_tile, half);
      EXPECT_EQ(plan.describe().find("half tiles") != std::string::npos, half > 0);
      with_half += plan.half_tile > 0;
      expect_plan_matches_the_oracle(rng, p, plan);
    }
    // AVX-512 and AVX2 have half tiles for each of these pairs.
    if (target.rfind("AVX", 0) == 0) {
      EXPECT_EQ(with_half, kTrials);
    }
  }
}

TEST_F(CopyRun, BFloat16TilesConvertLikeTheOracleWithAndWithoutTheNativeInstruction) {
  SCOPED_TRACE(ferry::testing::seed_trace());
  auto rng = ferry::testing::test_rng();
  // dst (rows x cols, contiguous along rows) = src (rows x cols, contiguous along cols).
  const int64_t rows = 96, cols = 80;
  const auto src_at = [&](int64_t i, int64_t j) { return static_cast<size_t>(i * cols + j); };
  std::vector<uint32_t> bits(static_cast<size_t>(rows * cols));
  for (auto& b : bits) {
    const auto exponent = static_cast<uint32_t>(1 + rng() % 254);  // normal
    b = (static_cast<uint32_t>(rng()) & 0x807FFFFFu) | exponent << 23;
    if (rng() % 4 == 0) b = (b & 0xFFFF0000u) | 0x8000u;  // a tie: rounds to the even neighbour
  }
  bits[src_at(20, 60)] = 0x7F7FFFFFu;  // the largest float32 rounds up to infinity
  bits[src_at(21, 61)] = 0xFF7FFFFFu;
  bits[src_at(22, 62)] = 0x7F800000u;  // infinity and zero stay
  bits[src_at(23, 63)] = 0x80000000u;
  // One value the instruction converts differently in each of three tiles.
  const int64_t nan[] = {5, 7}, denormal[] = {40, 20}, snan[] = {70, 50};
  bits[src_at(nan[0], nan[1])] = 0xFFC12345u;            // negative quiet NaN with a payload
  bits[src_at(denormal[0], denormal[1])] = 0x80412345u;  // -0x0041 in bfloat16, not -0
  bits[src_at(snan[0], snan[1])] = 0x7F800001u;          // signalling NaN
  Buffer src(bits.size() * 4, 0);
  std::memcpy(src.data(), bits.data(), bits.size() * 4);

  CopyProblem p;
  p.sizes = {rows, cols};
  p.dst_strides = {2, rows * 2};
  p.src_strides = {cols * 4, 4};
  p.src = reinterpret_cast<const char*>(src.data());
  p.dst_dtype = kBFloat16;
  p.src_dtype = kFloat32;
  Buffer expected(static_cast<size_t>(rows * cols * 2), 0);
  p.dst = reinterpret_cast<char*>(expected.data());
  testing::naive_copy(p);
  // The oracle's rule for those values (ferry's and PyTorch's), which the instruction's is not.
  const auto dst_bits = [&](const int64_t(&at)[2]) {
    uint16_t v = 0;
    std::memcpy(&v, expected.data() + (at[1] * rows + at[0]) * 2, 2);
    return v;
  };
  ASSERT_EQ(dst_bits(nan), 0x7FC0u);
  ASSERT_EQ(dst_bits(denormal), 0x8041u);
  ASSERT_EQ(dst_bits(snan), 0x7FC0u);

  const bool has_native = native_bf16();
  if (!has_native) std::printf("[   INFO   ] no AVX512_BF16 here: the portable rounding only\n");
  for (bool native : {true, false}) {
    set_native_bf16(native);
    CopyPlan plan = plan_copy(p);
    EXPECT_EQ(plan.native_bf16, native && has_native && std::string(simd_target()) == "AVX3");
    for (bool stream : {false, true}) {
      for (int threads : {1, 2}) {
        plan.stream = stream;
        plan.threads = threads;
        SCOPED_TRACE(plan.describe());
        Buffer actual(static_cast<size_t>(rows * cols * 2), 0);
        p.dst = reinterpret_cast<char*>(actual.data());
        run_copy(p, plan);
        ASSERT_EQ(testing::first_difference(expected.contents(), actual.contents()), "");
      }
    }
  }
}

// The benchmark's shapes, scaled down, with both store modes (non-temporal stores: 64-byte
// alignment peeling, tiles grouped into whole dst runs), on the best target and on AVX2 when
// present.
TEST_F(CopyRun, LargeProblemsMatchTheOracle) {
  SCOPED_TRACE(ferry::testing::seed_trace());
  auto rng = ferry::testing::test_rng();
  std::vector<std::string> targets = {""};
  for (const std::string& t : simd_targets()) {
    if (t == "AVX2") targets.push_back(t);
  }
  struct Shape {
    std::vector<int64_t> sizes, dst_strides, src_strides;  // in elements
    ScalarType dst_t, src_t;
  };
  const int64_t n = 1536;
  std::vector<Shape> shapes = {
      {{int64_t{1} << 21 | 3}, {1}, {1}, kFloat32, kFloat32},
      {{int64_t{1} << 22 | 5}, {1}, {1}, kBFloat16, kFloat32},
      {{n, n}, {1, n}, {n, 1}, kFloat32, kFloat32},
      {{2048, 2048}, {1, 2048}, {2048, 1}, kBFloat16, kFloat32},
      {{2048, 2048}, {1, 2048}, {2048, 1}, kBFloat16, kBFloat16},
      // Two-pass strips (16-bit dst) with a short last chunk, then a single-pass strip at the end
      // (1120 = 17 x 64 + 32 rows; blocks of 256 columns end in 96 = 64 + 32).
      {{1120, 1120}, {1, 1120}, {1120, 1}, kBFloat16, kBFloat16},
      {{1120, 1120}, {1, 1120}, {1120, 1}, kFloat16, kFloat32},
      {{2048, 1100}, {1, 2048}, {0, 1}, kFloat32, kFloat32},
      {{2048, 1100}, {1, 2048}, {2, 4100}, kFloat32, kFloat32},
      {{64, 3136, 11}, {1, 64, 64 * 3136}, {3136, 1, 64 * 3136}, kFloat32, kFloat32},
  };
#if defined(FERRY_SANITIZER_BUILD)
  shapes.resize(3);  // the oracle is slow under sanitizers; one contiguous, one transposed
  shapes.erase(shapes.begin() + 1);
#endif
  for (const Shape& s : shapes) {
    const auto ds = static_cast<int64_t>(element_size(s.dst_t));
    const auto ss = static_cast<int64_t>(element_size(s.src_t));
    int64_t src_extent = 1, dst_extent = 1;
    CopyProblem p;
    for (size_t k = 0; k < s.sizes.size(); ++k) {
      src_extent += (s.sizes[k] - 1) * s.src_strides[k];
      dst_extent += (s.sizes[k] - 1) * s.dst_strides[k];
      p.sizes.push_back(s.sizes[k]);
      p.dst_strides.push_back(s.dst_strides[k] * ds);
      p.src_strides.push_back(s.src_strides[k] * ss);
    }
    Buffer src(static_cast<size_t>(src_extent * ss), 0);
    testing::fill_values(rng, s.src_t, src.data(), src_extent);
    p.src = reinterpret_cast<const char*>(src.data());
    p.dst_dtype = s.dst_t;
    p.src_dtype = s.src_t;
    Buffer expected(static_cast<size_t>(dst_extent * ds), 0);
    p.dst = reinterpret_cast<char*>(expected.data());
    testing::naive_copy(p);
    for (const std::string& target : targets) {
      set_simd_target(target);
      for (bool stream : {false, true}) {
        Buffer actual(static_cast<size_t>(dst_extent * ds), 0);
        p.dst = reinterpret_cast<char*>(actual.data());
        CopyPlan plan = plan_copy(p);
        plan.stream = stream;
        SCOPED_TRACE(testing::describe_problem(p) + " " + plan.describe());
        run_copy(p, plan);
        ASSERT_EQ(testing::first_difference(expected.contents(), actual.contents()), "");
      }
    }
  }
}

}  // namespace
}  // namespace ferry::cpu
