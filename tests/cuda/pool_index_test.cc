// The CUDA pooling kernels' window arithmetic (ferry/backends/cuda/pool_index.h), run without a
// GPU: output sizes against values PyTorch 1.13 gives (hand-checked) and against the definition;
// the max window against the CPU loop's; and the gather-style backward ranges, which must hold
// every output whose window contains a given input position.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "ferry/backends/cuda/pool_index.h"

namespace ferry::testing {
namespace {

namespace pool = cuda::pool;

TEST(CudaPoolIndex, OutputSizesAsPyTorch) {
  // torch.nn.functional.max_pool2d / avg_pool2d output sizes.
  EXPECT_EQ(pool::output_size(112, 3, 2, 1, 1, false), 56);  // ResNet's stem pool
  EXPECT_EQ(pool::output_size(5, 2, 2, 0, 1, false), 2);
  EXPECT_EQ(pool::output_size(5, 2, 2, 0, 1, true), 3);
  EXPECT_EQ(pool::output_size(6, 3, 2, 1, 1, true), 4);
  EXPECT_EQ(pool::output_size(4, 2, 2, 1, 1, true), 3);
  // ceil_mode drops a last window that would start in the right padding (3 before the drop).
  EXPECT_EQ(pool::output_size(5, 3, 3, 1, 1, true), 2);
  EXPECT_EQ(pool::output_size(7, 3, 2, 0, 2, false), 2);  // dilation 2: span 5
  EXPECT_EQ(pool::output_size(1, 1, 1, 0, 1, false), 1);
}

TEST(CudaPoolIndex, OutputSizeMatchesItsDefinition) {
  for (int64_t in = 1; in <= 12; ++in) {
    for (int64_t k = 1; k <= 4; ++k) {
      for (int64_t s = 1; s <= 3; ++s) {
        for (int64_t d = 1; d <= 2; ++d) {
          for (int64_t pad = 0; 2 * pad <= (k - 1) * d + 1; ++pad) {
            const int64_t span = (k - 1) * d + 1;
            if (in + 2 * pad < span) continue;  // the kernels' callers refuse these
            // Floor mode: the windows (starting at o * s - pad) that end inside the padded input.
            int64_t fitting = 0;
            while (fitting * s - pad + span <= in + pad) ++fitting;
            EXPECT_EQ(pool::output_size(in, k, s, pad, d, false), fitting)
                << "in " << in << " k " << k << " s " << s << " pad " << pad << " d " << d;
            // Ceil mode: one more window when some input is left over, unless it would start in
            // the right padding.
            int64_t ceil_count =
                static_cast<int64_t>(std::ceil(static_cast<double>(in + 2 * pad - span) / s)) + 1;
            if ((ceil_count - 1) * s - pad >= in) --ceil_count;
            EXPECT_EQ(pool::output_size(in, k, s, pad, d, true), ceil_count)
                << "in " << in << " k " << k << " s " << s << " pad " << pad << " d " << d;
          }
        }
      }
    }
  }
}

TEST(CudaPoolIndex, MaxWindowMatchesTheCpuLoop) {
  for (int64_t in = 1; in <= 9; ++in) {
    for (int64_t k = 1; k <= 4; ++k) {
      for (int64_t s = 1; s <= 3; ++s) {
        for (int64_t d = 1; d <= 3; ++d) {
          for (int64_t pad = 0; 2 * pad <= (k - 1) * d + 1; ++pad) {
            for (int64_t o = 0; o < pool::output_size(in, k, s, pad, d, true); ++o) {
              int64_t h0 = o * s - pad;
              const int64_t h1 = std::min(h0 + (k - 1) * d + 1, in);
              while (h0 < 0) h0 += d;  // the CPU loop
              const pool::MaxWindow w = pool::max_window(o, in, k, s, pad, d);
              EXPECT_EQ(w.begin, h0);
              EXPECT_EQ(w.end, h1);
            }
          }
        }
      }
    }
  }
}

TEST(CudaPoolIndex, AvgWindowsAndDivisors) {
  // in 5, kernel 3, stride 2, pad 1, ceil: windows [-1, 2), [1, 4), [3, 6) -> clipped [0, 2),
  // [1, 4), [3, 5); padded sizes 3, 3, 3 (the last clipped to in + pad = 6).
  const pool::AvgWindow w0 = pool::avg_window(0, 5, 3, 2, 1);
  EXPECT_EQ(w0.begin, 0);
  EXPECT_EQ(w0.end, 2);
  EXPECT_EQ(w0.padded_size, 3);
  const pool::AvgWindow w2 = pool::avg_window(2, 5, 3, 2, 1);
  EXPECT_EQ(w2.begin, 3);
  EXPECT_EQ(w2.end, 5);
  EXPECT_EQ(w2.padded_size, 3);
  // ceil_mode window past the padded input: in 4, k 3, s 2, pad 0, ceil -> window 1 is [2, 5),
  // padded size 2 (clipped to in + pad = 4).
  EXPECT_EQ(pool::avg_window(1, 4, 3, 2, 0).padded_size, 2);
  EXPECT_EQ(pool::avg_divisor(w0, w2, true, 0), 9);
  EXPECT_EQ(pool::avg_divisor(w0, w2, false, 0), 4);
  EXPECT_EQ(pool::avg_divisor(w0, w2, true, 7), 7);
}

TEST(CudaPoolIndex, AvgBackwardRangesHoldEveryWindow) {
  for (int64_t in = 1; in <= 10; ++in) {
    for (int64_t k = 1; k <= 4; ++k) {
      for (int64_t s = 1; s <= 3; ++s) {
        for (int64_t pad = 0; 2 * pad <= k; ++pad) {
          for (bool ceil : {false, true}) {
            const int64_t out = pool::output_size(in, k, s, pad, 1, ceil);
            if (out < 1) continue;
            for (int64_t i = 0; i < in; ++i) {
              const pool::OutputRange r = pool::avg_outputs_of(i, k, s, pad, out);
              for (int64_t o = 0; o < out; ++o) {
                const pool::AvgWindow w = pool::avg_window(o, in, k, s, pad);
                if (i >= w.begin && i < w.end) {
                  EXPECT_TRUE(o >= r.begin && o < r.end)
                      << "input " << i << " is in window " << o << " but outside [" << r.begin
                      << ", " << r.end << ") (in " << in << " k " << k << " s " << s << " pad "
                      << pad << " ceil " << ceil << ")";
                }
              }
            }
          }
        }
      }
    }
  }
}

TEST(CudaPoolIndex, AdaptiveWindowsAndTheirInverse) {
  // PyTorch's adaptive_avg_pool2d windows for 5 -> 3: [0, 2), [1, 4), [3, 5).
  EXPECT_EQ(pool::adaptive_begin(0, 3, 5), 0);
  EXPECT_EQ(pool::adaptive_end(0, 3, 5), 2);
  EXPECT_EQ(pool::adaptive_begin(1, 3, 5), 1);
  EXPECT_EQ(pool::adaptive_end(1, 3, 5), 4);
  EXPECT_EQ(pool::adaptive_begin(2, 3, 5), 3);
  EXPECT_EQ(pool::adaptive_end(2, 3, 5), 5);
  for (int64_t in = 1; in <= 13; ++in) {
    for (int64_t out = 1; out <= 13; ++out) {
      for (int64_t o = 0; o < out; ++o) {
        EXPECT_LT(pool::adaptive_begin(o, out, in), pool::adaptive_end(o, out, in));
      }
      for (int64_t i = 0; i < in; ++i) {
        const pool::OutputRange r = pool::adaptive_outputs_of(i, in, out);
        for (int64_t o = 0; o < out; ++o) {
          if (i >= pool::adaptive_begin(o, out, in) && i < pool::adaptive_end(o, out, in)) {
            EXPECT_TRUE(o >= r.begin && o < std::min(r.end, out))
                << "input " << i << " of " << in << " in window " << o << " of " << out;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace ferry::testing
