// The store-mode rule (copy_tuning.h, docs/kernels.md "Store mode"): thresholds from the cache
// sizes, FERRY_STREAM_THRESHOLD's syntax, what plan_copy picks, and transposes forced to stream
// with ragged edges (rows and columns past the last whole streaming step), on every SIMD target.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ferry/backends/cpu/copy_plan.h"
#include "ferry/backends/cpu/copy_tuning.h"
#include "ferry/backends/cpu/simd.h"
#include "ferry/core/error.h"
#include "ferry/iter/parallel.h"
#include "tests/cpu/copy_problem_gen.h"
#include "tests/support/random.h"

namespace ferry::cpu {
namespace {

using testing::Buffer;
using tuning::stream_thresholds_for;

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = 1024 * kKiB;

TEST(StoreMode, ThresholdsFollowTheCaches) {
  // This development VM: 2 MiB L2 per core, 480 MiB L3 reported, 2 threads.
  auto t = stream_thresholds_for(2 * kMiB, 480 * kMiB, 2);
  EXPECT_EQ(t.scattered, 512 * kKiB);
  EXPECT_EQ(t.sequential, 8 * kMiB);  // glibc's 180 MiB, capped at 4 L2s
  // A desktop: 1 MiB L2, 16 MiB L3 shared by 16 threads: 3/4 of 1 MiB per thread.
  t = stream_thresholds_for(kMiB, 16 * kMiB, 16);
  EXPECT_EQ(t.scattered, 256 * kKiB);
  EXPECT_EQ(t.sequential, 768 * kKiB);
  // A tiny LLC share never goes below the scattered threshold.
  t = stream_thresholds_for(kMiB, 2 * kMiB, 64);
  EXPECT_EQ(t.sequential, 256 * kKiB);
  // Nothing reported: a 1 MiB L2 is assumed, and no LLC share.
  t = stream_thresholds_for(0, 0, 4);
  EXPECT_EQ(t.scattered, 256 * kKiB);
  EXPECT_EQ(t.sequential, 4 * kMiB);
}

TEST(StoreMode, L2SetSpanIsSizeOverWays) {
  EXPECT_EQ(tuning::l2_set_span_for(kMiB, 16), 64 * kKiB);       // Zen 5
  EXPECT_EQ(tuning::l2_set_span_for(2 * kMiB, 16), 128 * kKiB);  // Sapphire Rapids
  EXPECT_EQ(tuning::l2_set_span_for(1280 * kKiB, 20), 64 * kKiB);
  // Not reported, or not a whole number of bytes per way: the fallback.
  EXPECT_EQ(tuning::l2_set_span_for(0, 16), tuning::kFallbackL2SetSpan);
  EXPECT_EQ(tuning::l2_set_span_for(kMiB, 0), tuning::kFallbackL2SetSpan);
  EXPECT_EQ(tuning::l2_set_span_for(kMiB, 3), tuning::kFallbackL2SetSpan);
  EXPECT_GT(tuning::l2_set_span(), 0);
}

TEST(StoreMode, ParsesTheEnvironmentOverride) {
  EXPECT_EQ(tuning::parse_stream_threshold("0"), 0);
  EXPECT_EQ(tuning::parse_stream_threshold("12345"), 12345);
  EXPECT_EQ(tuning::parse_stream_threshold("64K"), 64 * kKiB);
  EXPECT_EQ(tuning::parse_stream_threshold("8m"), 8 * kMiB);
  EXPECT_EQ(tuning::parse_stream_threshold("1G"), 1024 * kMiB);
  EXPECT_EQ(tuning::parse_stream_threshold("never"), tuning::kStreamNever);
  for (const char* bad : {"", "M", "abc", "8X", "8MB", "-1", "1 M"}) {
    EXPECT_THROW(tuning::parse_stream_threshold(bad), Error) << bad;
  }
}

// A store_problem over sizes with strides in elements (fastest-first for dst); planning reads no
// data.
CopyProblem store_problem(std::vector<int64_t> sizes, std::vector<int64_t> dst,
                          std::vector<int64_t> src, ScalarType t = kFloat32) {
  CopyProblem p;
  const auto size = static_cast<int64_t>(element_size(t));
  for (size_t d = 0; d < sizes.size(); ++d) {
    p.sizes.push_back(sizes[d]);
    p.dst_strides.push_back(dst[d] * size);
    p.src_strides.push_back(src[d] * size);
  }
  p.dst_dtype = p.src_dtype = t;
  return p;
}

class StoreModePlan : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = get_num_threads();
    set_num_threads(1);
  }
  void TearDown() override { set_num_threads(saved_); }
  int saved_ = 1;
};

TEST_F(StoreModePlan, StreamsPastTheThresholdOfTheWayTheKernelWrites) {
  const tuning::StreamThresholds& limits = tuning::stream_thresholds();
  if (limits.scattered >= 256 * kMiB || limits.sequential >= 256 * kMiB) {
    GTEST_SKIP() << "FERRY_STREAM_THRESHOLD set to a large value";
  }
  // Square float32 transposes just below and at the scattered threshold (one thread).
  const auto side = [](int64_t bytes) {
    return static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(bytes) / 4)));
  };
  const int64_t big = std::max<int64_t>(side(limits.scattered), 8);
  EXPECT_TRUE(plan_copy(store_problem({big, big}, {1, big}, {big, 1})).stream);
  if (limits.scattered >= 4 * 64 * 64) {
    const int64_t small = side(limits.scattered) - 2;
    const CopyPlan plan = plan_copy(store_problem({small, small}, {1, small}, {small, 1}));
    EXPECT_EQ(plan.kind, CopyKernelKind::Transpose);
    EXPECT_FALSE(plan.stream);
    EXPECT_NE(plan.describe().find("ordinary stores"), std::string::npos) << plan.describe();
  }
  // Contiguous copies use the sequential threshold.
  const int64_t n = limits.sequential / 4;
  const CopyPlan at = plan_copy(store_problem({n}, {1}, {1}));
  EXPECT_TRUE(at.stream);
  EXPECT_NE(at.describe().find("streaming stores"), std::string::npos) << at.describe();
  EXPECT_FALSE(plan_copy(store_problem({n - 16}, {1}, {1})).stream);
  // Never with lazy neg (applied in place afterwards), nor for a strided destination.
  CopyProblem negated = store_problem({2 * n}, {1}, {1});
  negated.neg = true;
  EXPECT_FALSE(plan_copy(negated).stream);
  EXPECT_FALSE(plan_copy(store_problem({2 * n}, {2}, {1})).stream);
}

// A transpose whose dim 0 gives each dst row less than two lines per block (many-dim
// permutations of narrow elements) keeps ordinary stores, however large: streaming would store
// single lines or less, scattered (plan_copy).
TEST_F(StoreModePlan, TransposesWithRunsOfLessThanTwoLinesDoNotStream) {
  const tuning::StreamThresholds& limits = tuning::stream_thresholds();
  if (limits.scattered > 16 * kMiB) GTEST_SKIP() << "FERRY_STREAM_THRESHOLD set to a large value";
  if (std::string(simd_target()) == "SCALAR") GTEST_SKIP() << "no register tiles on SCALAR";
  for (ScalarType t : {kUInt8, kBFloat16, kFloat32}) {
    const auto size = static_cast<int64_t>(element_size(t));
    for (int64_t run : {64, 128}) {
      // dst [j, outer, i], src [i, outer, j]: i = dim 0 of n0 elements, j = 256.
      const int64_t n0 = run / size, cols = 256;
      const int64_t outer = std::max<int64_t>(8, 4 * limits.scattered / (run * cols));
      const CopyPlan plan = plan_copy(
          store_problem({n0, outer, cols}, {1, n0, n0 * outer}, {outer * cols, cols, 1}, t));
      SCOPED_TRACE(std::string(scalar_type_name(t)) + ", " + std::to_string(run) +
                   "-byte runs: " + plan.describe());
      ASSERT_EQ(plan.kind, CopyKernelKind::Transpose);
      EXPECT_EQ(plan.stream, run >= tuning::kTransposeMinStreamRunBytes);
    }
  }
}

TEST_F(StoreModePlan, StreamingTransposesGoByPanelsWhenDstRowsAreOffTheirLines) {
  if (tuning::stream_thresholds().scattered > 16 * kMiB) {
    GTEST_SKIP() << "FERRY_STREAM_THRESHOLD set to a large value";
  }
  if (std::string(simd_target()) == "SCALAR") GTEST_SKIP() << "no register tiles on SCALAR";
  // 3008 float32 elements are 188 lines: every row starts on a line. 3000 are 187.5.
  const CopyPlan lined = plan_copy(store_problem({3008, 3008}, {1, 3008}, {3008, 1}));
  ASSERT_TRUE(lined.stream);
  EXPECT_FALSE(lined.panel);
  EXPECT_EQ(lined.describe().find("by panels"), std::string::npos) << lined.describe();
  const CopyPlan off = plan_copy(store_problem({3000, 3000}, {1, 3000}, {3000, 1}));
  ASSERT_TRUE(off.stream);
  EXPECT_TRUE(off.panel);
  EXPECT_EQ(off.block_rows, tuning::kTransposePanelRows);
  EXPECT_NE(off.describe().find("by panels"), std::string::npos) << off.describe();
  // Lined-up rows, but dst itself off its line (the plan looks at the address only).
  CopyProblem shifted = store_problem({3008, 3008}, {1, 3008}, {3008, 1});
  alignas(64) static char base[128];
  shifted.dst = base + 4;
  EXPECT_TRUE(plan_copy(shifted).panel);
  shifted.dst = base + 64;
  EXPECT_FALSE(plan_copy(shifted).panel);
  // Ordinary stores need no panels.
  EXPECT_FALSE(plan_copy(store_problem({100, 100}, {1, 100}, {100, 1})).panel);
}

// Transposes forced to stream, with dst rows padded to whole lines so that the tiles stream by
// strips (and dst moved off its line, or rows not padded, so that they stream by panels: every
// row then starts at its own offset in a line), and sizes ragged against the streaming steps:
// the grouped runs, the carried lines, the ordinary-store leftovers and the strided edges must
// all agree with the oracle. Strips of several row blocks per thread also read the next one
// ahead (Note [transpose read-ahead]).
TEST(StoreModeRun, StreamingTransposesWithRaggedEdgesOnEveryTarget) {
  SCOPED_TRACE(ferry::testing::seed_trace());
  auto rng = ferry::testing::test_rng();
  struct Pair {
    ScalarType d, s;
    bool conj = false, neg = false;
  };
  // Fused, converted first (with conj/neg too: applied in the buffer, then streamed), converted
  // after (16-byte complex), and strided.
  const Pair pairs[] = {{kFloat32, kFloat32},
                        {kBFloat16, kBFloat16},
                        {kBFloat16, kFloat32},
                        {kFloat16, kFloat32},
                        {kFloat32, kBFloat16},
                        {kFloat32, kFloat16},
                        {kUInt8, kUInt8},
                        {kFloat64, kFloat64},
                        {kComplex128, kComplex128},
                        {kInt32, kFloat32},
                        {kFloat32, kFloat32, false, true},
                        {kComplex64, kComplex64, true, false},
                        {kComplex128, kComplex64, true, true}};
#if defined(__SANITIZE_THREAD__)
  // ThreadSanitizer watches the two threads meet, which fewer shapes show as well (the full sweep
  // took half a minute there; the other builds run it).
  const int64_t rows_list[] = {48, 129};
  const int64_t cols_list[] = {33, 300};
#else
  const int64_t rows_list[] = {16, 48, 100, 129, 300};  // along i (dst contiguous)
  const int64_t cols_list[] = {33, 64, 300};            // along j (src contiguous)
#endif
  for (const std::string& target : simd_targets()) {
    set_simd_target(target);
    SCOPED_TRACE(target);
    for (const Pair& pair : pairs) {
      const ScalarType d = pair.d, s = pair.s;
      const auto ds = static_cast<int64_t>(element_size(d));
      const auto ss = static_cast<int64_t>(element_size(s));
      for (int64_t rows : rows_list) {
        for (int64_t cols : cols_list) {
          for (bool padded : {true, false}) {
            // Padded to whole lines, or one element more than the rows (each row off by its own
            // offset).
            const int64_t dst_row = padded ? (rows * ds + 127) / 64 * 64 / ds : rows + 1;
            const int64_t src_row = cols + 3;
            CopyProblem p;
            p.sizes = {rows, cols};
            p.dst_strides = {ds, dst_row * ds};
            p.src_strides = {src_row * ss, ss};
            p.dst_dtype = d;
            p.src_dtype = s;
            p.conj = pair.conj;
            p.neg = pair.neg;
            Buffer src(static_cast<size_t>(rows * src_row * ss), 0);
            testing::fill_values(rng, s, src.data(), rows * src_row);
            p.src = reinterpret_cast<const char*>(src.data());
            const auto dst_bytes = static_cast<size_t>(cols * dst_row * ds);
            std::vector<unsigned char> before(dst_bytes);
            for (auto& b : before) b = static_cast<unsigned char>(rng());
            size_t misalign = 0;  // dst off its 64-byte line: the tiles stream by panels
            auto run = [&](const CopyPlan* plan) {
              Buffer dst(dst_bytes, misalign);
              std::copy(before.begin(), before.end(), dst.data());
              p.dst = reinterpret_cast<char*>(dst.data());
              if (plan == nullptr) {
                testing::naive_copy(p);
              } else {
                run_copy(p, *plan);
              }
              return std::vector<unsigned char>(dst.data(), dst.data() + dst_bytes);
            };
            SCOPED_TRACE(testing::describe_problem(p));
            const auto expected = run(nullptr);
            CopyPlan plan = plan_copy(p);
            ASSERT_EQ(plan.kind, CopyKernelKind::Transpose);
            for (bool stream : {true, false}) {
              for (int threads : {1, 2}) {
                for (size_t offset : {size_t{0}, static_cast<size_t>(ds)}) {
                  misalign = offset;
                  plan.stream = stream;
                  plan.threads = threads;
                  ASSERT_EQ(testing::first_difference(expected, run(&plan)), "")
                      << plan.describe() << ", dst " << offset << " bytes past a line";
                }
              }
            }
          }
        }
      }
    }
  }
  set_simd_target("");
}

}  // namespace
}  // namespace ferry::cpu
