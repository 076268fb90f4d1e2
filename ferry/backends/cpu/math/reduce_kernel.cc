// The CPU reduction kernel: each output element walks its reduced elements, innermost the
// reduced dim with the smallest stride; outputs are split over threads. Floating inputs
// accumulate in double, integers in int64 (sum of bool counts the trues, as PyTorch's).
#include <cmath>
#include <limits>
#include <type_traits>

#include "ferry/backends/cpu/math/math_kernels.h"
#include "ferry/backends/cpu/math/wrapping.h"
#include "ferry/core/convert.h"
#include "ferry/core/error.h"
#include "ferry/iter/parallel.h"

namespace ferry::cpu {
namespace {

// The element walk of one reduction: kept dims (output positions) and reduced dims, with the
// input's strides (elements) and the output's.
struct ReducePlan {
  DimVector kept_sizes, kept_in_strides, kept_out_strides;
  DimVector red_sizes, red_strides;  // innermost last
  int64_t outputs = 1;
  int64_t reduced = 1;
};

ReducePlan plan_reduce(const Tensor& out, const Tensor& input, const std::vector<int64_t>& dims) {
  ReducePlan p;
  std::vector<bool> is_reduced(static_cast<size_t>(input.dim()), false);
  for (int64_t d : dims) is_reduced[static_cast<size_t>(d)] = true;
  for (int64_t d = 0; d < input.dim(); ++d) {
    if (is_reduced[static_cast<size_t>(d)]) {
      p.red_sizes.push_back(input.size(d));
      p.red_strides.push_back(input.stride(d));
      p.reduced *= input.size(d);
    } else {
      p.kept_sizes.push_back(input.size(d));
      p.kept_in_strides.push_back(input.stride(d));
      p.kept_out_strides.push_back(out.stride(d));
      p.outputs *= input.size(d);
    }
  }
  // Innermost: the reduced dim with the smallest stride, so the walk is as dense as it can be.
  // (Argmax reduces one dim, so its index order is unchanged.)
  for (size_t i = 0; i + 1 < p.red_sizes.size(); ++i) {
    for (size_t j = i + 1; j < p.red_sizes.size(); ++j) {
      if (p.red_strides[i] < p.red_strides[j]) {
        std::swap(p.red_strides[i], p.red_strides[j]);
        std::swap(p.red_sizes[i], p.red_sizes[j]);
      }
    }
  }
  return p;
}

// Offsets (elements) of output `o`'s first input element and of its output element.
void kept_offsets(const ReducePlan& p, int64_t o, int64_t* in_off, int64_t* out_off) {
  *in_off = 0;
  *out_off = 0;
  for (size_t d = p.kept_sizes.size(); d-- > 0;) {
    const int64_t i = o % p.kept_sizes[d];
    o /= p.kept_sizes[d];
    *in_off += i * p.kept_in_strides[d];
    *out_off += i * p.kept_out_strides[d];
  }
}

// Calls f(value) for every reduced element of the output at input offset `base`, in index
// order of the reduced dims (outermost first).
template <typename In, typename F>
void walk_reduced(const ReducePlan& p, const In* base, F&& f) {
  const size_t nd = p.red_sizes.size();
  if (nd == 0) {
    f(*base);
    return;
  }
  const int64_t inner = p.red_sizes[nd - 1];
  const int64_t inner_stride = p.red_strides[nd - 1];
  const int64_t rows = p.reduced / std::max<int64_t>(inner, 1);
  if (inner == 0) return;
  DimVector idx(nd - 1, 0);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t off = 0;
    for (size_t d = 0; d + 1 < nd; ++d) off += idx[d] * p.red_strides[d];
    const In* row = base + off;
    if (inner_stride == 1) {
      for (int64_t i = 0; i < inner; ++i) f(row[i]);
    } else {
      for (int64_t i = 0; i < inner; ++i) f(row[i * inner_stride]);
    }
    for (size_t d = nd - 1; d-- > 0;) {
      if (++idx[d] < p.red_sizes[d]) break;
      idx[d] = 0;
    }
  }
}

template <typename T>
using acc_t = std::conditional_t<std::is_floating_point_v<T> || std::is_same_v<T, Half> ||
                                     std::is_same_v<T, BFloat16>,
                                 double, int64_t>;

template <typename In, typename Out>
void reduce_typed(const Tensor& out, const Tensor& input, const ReducePlan& p, ReduceKind kind) {
  const In* in = static_cast<const In*>(input.data_ptr());
  Out* o = static_cast<Out*>(out.data_ptr());
  using Acc = acc_t<In>;
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(p.reduced, 1));
  parallel_for(0, p.outputs, grain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      int64_t in_off = 0, out_off = 0;
      kept_offsets(p, i, &in_off, &out_off);
      const In* base = in + in_off;
      switch (kind) {
        case ReduceKind::Sum:
        case ReduceKind::Mean: {
          Acc acc = 0;
          walk_reduced(p, base, [&](In v) { acc = wrapping_add(acc, static_cast<Acc>(v)); });
          if (kind == ReduceKind::Mean) {
            o[out_off] =
                convert_value<Out>(static_cast<double>(acc) / static_cast<double>(p.reduced));
          } else {
            o[out_off] = convert_value<Out>(acc);
          }
          break;
        }
        case ReduceKind::Amax: {
          Acc best = 0;
          bool first = true;
          walk_reduced(p, base, [&](In v) {
            const auto x = static_cast<Acc>(v);
            if constexpr (std::is_floating_point_v<Acc>) {
              if (std::isnan(best)) return;
              if (first || std::isnan(x) || x > best) best = x;
            } else {
              if (first || x > best) best = x;
            }
            first = false;
          });
          o[out_off] = convert_value<Out>(best);
          break;
        }
        case ReduceKind::Argmax: {
          Acc best = 0;
          int64_t best_index = 0, index = 0;
          bool done = false;
          walk_reduced(p, base, [&](In v) {
            const auto x = static_cast<Acc>(v);
            if (!done) {
              bool take = index == 0 || x > best;
              if constexpr (std::is_floating_point_v<Acc>) {
                if (std::isnan(x)) {
                  take = true;
                  done = true;  // the first NaN is the maximum
                }
              }
              if (take) {
                best = x;
                best_index = index;
              }
            }
            ++index;
          });
          o[out_off] = convert_value<Out>(best_index);
          break;
        }
      }
    }
  });
}

template <typename T>
constexpr bool is_real_non_fp8_v =
    !std::is_same_v<T, std::complex<float>> && !std::is_same_v<T, std::complex<double>> &&
    !std::is_same_v<T, Float8_e4m3fn> && !std::is_same_v<T, Float8_e5m2>;

}  // namespace

void reduce(const Tensor& out, const Tensor& input, const std::vector<int64_t>& dims,
            ReduceKind kind) {
  FERRY_CHECK_AS(ShapeError, out.dim() == input.dim(), "reduce: expected the output (sizes ",
                 out.sizes(), ") to keep the input's rank (sizes ", input.sizes(), ")");
  FERRY_CHECK_AS(DTypeError, kind != ReduceKind::Argmax || out.dtype() == kInt64,
                 "argmax: expected an int64 output, but got ", out.dtype());
  if (out.numel() == 0) return;
  const ReducePlan plan = plan_reduce(out, input, dims);
  FERRY_CHECK(plan.reduced > 0 || kind == ReduceKind::Sum || kind == ReduceKind::Mean,
              "reduce: expected a non-empty reduction for amax/argmax, but the reduced dims of ",
              input.sizes(), " hold no elements");
  visit_dtype(input.dtype(), [&]<typename In>() {
    if constexpr (!is_real_non_fp8_v<In>) {
      FERRY_FAIL_AS(DTypeError, "reduce: expected a real dtype, but got ", input.dtype());
    } else {
      visit_dtype(out.dtype(), [&]<typename Out>() {
        if constexpr (!is_real_non_fp8_v<Out>) {
          FERRY_FAIL_AS(DTypeError, "reduce: expected a real output dtype, but got ", out.dtype());
        } else {
          reduce_typed<In, Out>(out, input, plan, kind);
        }
      });
    }
  });
}

FERRY_REGISTER_DISPATCH(reduce_stub, DeviceType::CPU, &reduce);

}  // namespace ferry::cpu
