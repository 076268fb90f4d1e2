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

template <typename T>
constexpr bool is_real_non_fp8_v =
    !std::is_same_v<T, std::complex<float>> && !std::is_same_v<T, std::complex<double>> &&
    !std::is_same_v<T, Float8_e4m3fn> && !std::is_same_v<T, Float8_e5m2>;

// Writes n reduced values (accumulator, mean or index type V) to the output elements at `offsets`
// (elements), converting to the output dtype as the typed loop did. The walk is instantiated per
// input dtype and the store per output dtype, not per pair: 12 walks and 24 stores
// instead of 144 walks.
template <typename V>
using StoreValues = void (*)(void* out, const int64_t* offsets, const V* values, int64_t n);

template <typename Out, typename V>
void store_values(void* out, const int64_t* offsets, const V* values, int64_t n) {
  Out* o = static_cast<Out*>(out);
  for (int64_t i = 0; i < n; ++i) o[offsets[i]] = convert_value<Out>(values[i]);
}

template <typename V>
StoreValues<V> store_for(ScalarType out_dtype) {
  return visit_dtype(out_dtype, [&]<typename Out>() -> StoreValues<V> {
    if constexpr (!is_real_non_fp8_v<Out>) {
      FERRY_FAIL_AS(DTypeError, "reduce: expected a real output dtype, but got ", out_dtype);
    } else {
      return &store_values<Out, V>;
    }
  });
}

// The reduced value of one output: the accumulator for sum and amax, the mean in double, the
// index for argmax; results go out in blocks through the output dtype's store.
template <typename In>
void reduce_typed(const Tensor& out, const Tensor& input, const ReducePlan& p, ReduceKind kind) {
  using Acc = acc_t<In>;
  const In* in = static_cast<const In*>(input.data_ptr());
  void* o = out.data_ptr();
  // Mean divides in double; argmax stores an int64 index (its output is int64).
  const StoreValues<Acc> store_acc = store_for<Acc>(out.dtype());
  const StoreValues<double> store_mean = store_for<double>(out.dtype());
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(p.reduced, 1));
  parallel_for(0, p.outputs, grain, [&](int64_t begin, int64_t end) {
    constexpr int64_t kBlock = 256;
    int64_t offsets[kBlock];
    Acc values[kBlock];
    double means[kBlock];
    for (int64_t block = begin; block < end; block += kBlock) {
      const int64_t n = std::min(kBlock, end - block);
      for (int64_t k = 0; k < n; ++k) {
        int64_t in_off = 0;
        kept_offsets(p, block + k, &in_off, &offsets[k]);
        const In* base = in + in_off;
        switch (kind) {
          case ReduceKind::Sum:
          case ReduceKind::Mean: {
            Acc acc = 0;
            walk_reduced(p, base, [&](In v) { acc = wrapping_add(acc, static_cast<Acc>(v)); });
            values[k] = acc;
            if (kind == ReduceKind::Mean) {
              means[k] = static_cast<double>(acc) / static_cast<double>(p.reduced);
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
            values[k] = best;
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
            static_cast<int64_t*>(o)[offsets[k]] = best_index;  // checked: an int64 output
            break;
          }
        }
      }
      if (kind == ReduceKind::Mean) {
        store_mean(o, offsets, means, n);
      } else if (kind != ReduceKind::Argmax) {
        store_acc(o, offsets, values, n);
      }
    }
  });
}

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
      reduce_typed<In>(out, input, plan, kind);
    }
  });
}

FERRY_REGISTER_DISPATCH(reduce_stub, DeviceType::CPU, &reduce);

}  // namespace ferry::cpu
