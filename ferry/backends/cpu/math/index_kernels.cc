// CPU kernels of row lookups (index_select along dim 0, embedding's forward), row scatter-adds
// (index_add along dim 0, embedding's backward) and the negative log likelihood. Indices are
// checked as they are read: an index out of range raises IndexError naming it and the range,
// before anything is written (index_add) or for the element it would write (index_select).
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "ferry/backends/cpu/math/math_kernels.h"
#include "ferry/core/convert.h"
#include "ferry/core/error.h"
#include "ferry/core/views.h"
#include "ferry/iter/parallel.h"

namespace ferry::cpu {
namespace {

// The indices of a 1-d int64 or int32 tensor, as int64, checked against [0, limit) except for
// `skip` (which may lie outside it).
std::vector<int64_t> read_indices(const Tensor& index, int64_t limit, const char* op,
                                  std::optional<int64_t> skip = std::nullopt) {
  FERRY_CHECK_AS(DTypeError, index.dtype() == kInt64 || index.dtype() == kInt32, op,
                 ": expected int64 or int32 indices, but got ", index.dtype());
  std::vector<int64_t> out(static_cast<size_t>(index.numel()));
  const Tensor flat = index.dim() == 1 ? index : index.reshape({-1});
  const int64_t stride = flat.stride(0);
  for (int64_t i = 0; i < flat.numel(); ++i) {
    const int64_t v = index.dtype() == kInt64
                          ? static_cast<const int64_t*>(flat.data_ptr())[i * stride]
                          : static_cast<const int32_t*>(flat.data_ptr())[i * stride];
    if (skip && v == *skip) {
      out[static_cast<size_t>(i)] = v;
      continue;
    }
    FERRY_CHECK_AS(IndexError, v >= 0 && v < limit, op, ": index ", v,
                   " is out of bounds: expected a value in [0, ", limit, ")");
    out[static_cast<size_t>(i)] = v;
  }
  return out;
}

template <typename T>
constexpr bool is_real_v =
    !std::is_same_v<T, std::complex<float>> && !std::is_same_v<T, std::complex<double>>;

}  // namespace

void index_select(const Tensor& out, const Tensor& self, const Tensor& index) {
  FERRY_CHECK_AS(ShapeError,
                 self.dim() >= 1 && out.dim() == self.dim() && out.size(0) == index.numel(),
                 "index_select: expected out [", index.numel(), ", ...] for self ", self.sizes(),
                 ", but got out ", out.sizes());
  const std::vector<int64_t> rows = read_indices(index, self.size(0), "index_select");
  // Rows are written through a [rows, width] view of out; an out that has none (its trailing
  // dims do not merge) is filled through a dense temporary and copied in.
  const bool viewable =
      out.numel() == 0 ||
      native::compute_view_strides(out.sizes(), out.strides(),
                                   {out.size(0), out.numel() / std::max<int64_t>(out.size(0), 1)});
  if (!viewable) {
    Tensor dense = out.contiguous();
    index_select(dense, self, index);
    Tensor(out).copy_(dense);
    return;
  }
  if (out.numel() == 0) return;
  const Tensor src_rows = self.contiguous().reshape({self.size(0), -1});
  const Tensor dst_rows = native::view(out, {out.size(0), -1});
  const int64_t width = src_rows.size(1);
  visit_dtype(self.dtype(), [&]<typename T>() {
    const T* s = static_cast<const T*>(src_rows.data_ptr());
    T* d = static_cast<T*>(dst_rows.data_ptr());
    const int64_t ss0 = src_rows.stride(0), ss1 = src_rows.stride(1);
    const int64_t ds0 = dst_rows.stride(0), ds1 = dst_rows.stride(1);
    parallel_for(0, static_cast<int64_t>(rows.size()),
                 std::max<int64_t>(1, 16384 / std::max<int64_t>(width, 1)),
                 [&](int64_t begin, int64_t end) {
                   for (int64_t i = begin; i < end; ++i) {
                     const T* from = s + rows[static_cast<size_t>(i)] * ss0;
                     T* to = d + i * ds0;
                     if (ss1 == 1 && ds1 == 1) {
                       std::memcpy(to, from, static_cast<size_t>(width) * sizeof(T));
                     } else {
                       for (int64_t j = 0; j < width; ++j) to[j * ds1] = from[j * ss1];
                     }
                   }
                 });
  });
}

void index_add(const Tensor& self, const Tensor& index, const Tensor& source,
               std::optional<int64_t> skip_index) {
  FERRY_CHECK_AS(ShapeError,
                 self.dim() >= 1 && source.dim() == self.dim() && source.size(0) == index.numel(),
                 "index_add: expected source [", index.numel(), ", ...] for self ", self.sizes(),
                 ", but got source ", source.sizes());
  const std::vector<int64_t> rows = read_indices(index, self.size(0), "index_add", skip_index);
  const Tensor dst_rows = self.reshape({self.size(0), -1});
  const Tensor src_rows = source.reshape({source.size(0), -1});
  FERRY_CHECK(dst_rows.is_alias_of(self), "index_add: expected self to be viewable as rows");
  const int64_t width = dst_rows.size(1);
  visit_dtype(self.dtype(), [&]<typename T>() {
    if constexpr (!is_real_v<T> || std::is_same_v<T, bool>) {
      FERRY_FAIL_AS(DTypeError, "index_add: expected a real dtype, but got ", self.dtype());
    } else {
      T* d = static_cast<T*>(dst_rows.data_ptr());
      const T* s = static_cast<const T*>(src_rows.data_ptr());
      const int64_t ds0 = dst_rows.stride(0), ds1 = dst_rows.stride(1);
      const int64_t ss0 = src_rows.stride(0), ss1 = src_rows.stride(1);
      // Rows may repeat, so columns are split over threads, never rows.
      parallel_for(0, width, 2048, [&](int64_t begin, int64_t end) {
        for (size_t i = 0; i < rows.size(); ++i) {
          if (skip_index && rows[i] == *skip_index) continue;
          T* to = d + rows[i] * ds0;
          const T* from = s + static_cast<int64_t>(i) * ss0;
          for (int64_t j = begin; j < end; ++j) {
            if constexpr (std::is_arithmetic_v<T>) {
              // float64 and the integers add in their own type (float would round them).
              to[j * ds1] = static_cast<T>(to[j * ds1] + from[j * ss1]);
            } else {
              to[j * ds1] = static_cast<T>(static_cast<float>(to[j * ds1]) +
                                           static_cast<float>(from[j * ss1]));
            }
          }
        }
      });
    }
  });
}

void nll_loss_forward(const Tensor& out, const Tensor& total_weight, const Tensor& log_probs,
                      const Tensor& target, const Tensor& weight, bool per_element,
                      int64_t ignore_index) {
  const Tensor lp = log_probs.dim() == 1 ? log_probs.unsqueeze(0) : log_probs;
  const int64_t n = lp.size(0), classes = lp.size(1);
  const std::vector<int64_t> t = read_indices(target, classes, "nll_loss", ignore_index);
  visit_dtype(lp.dtype(), [&]<typename T>() {
    if constexpr (!is_real_v<T> || std::is_integral_v<T>) {
      FERRY_FAIL_AS(DTypeError, "nll_loss: expected floating log-probabilities, but got ",
                    lp.dtype());
    } else {
      const T* p = static_cast<const T*>(lp.data_ptr());
      const int64_t s0 = lp.stride(0), s1 = lp.stride(1);
      auto w = [&](int64_t c) -> double {
        if (!weight.defined()) return 1.0;
        return convert_value<double>(
            static_cast<const T*>(weight.data_ptr())[c * weight.stride(0)]);
      };
      double sum = 0, wsum = 0;
      for (int64_t i = 0; i < n; ++i) {
        const int64_t c = t[static_cast<size_t>(i)];
        double loss = 0;
        if (c != ignore_index) {
          const double wc = w(c);
          loss = -wc * static_cast<double>(p[i * s0 + c * s1]);
          wsum += wc;
        }
        if (per_element) {
          static_cast<T*>(out.data_ptr())[i * (out.dim() > 0 ? out.stride(0) : 0)] =
              static_cast<T>(loss);
        } else {
          sum += loss;
        }
      }
      if (!per_element) *static_cast<T*>(out.data_ptr()) = static_cast<T>(sum);
      *static_cast<T*>(total_weight.data_ptr()) = static_cast<T>(wsum);
    }
  });
}

void nll_loss_backward(const Tensor& grad_input, const Tensor& grad_out, const Tensor& target,
                       const Tensor& weight, bool per_element, int64_t ignore_index, double scale) {
  const Tensor gi = grad_input.dim() == 1 ? grad_input.unsqueeze(0) : grad_input;
  const int64_t n = gi.size(0), classes = gi.size(1);
  const std::vector<int64_t> t = read_indices(target, classes, "nll_loss_backward", ignore_index);
  visit_dtype(gi.dtype(), [&]<typename T>() {
    if constexpr (!is_real_v<T> || std::is_integral_v<T>) {
      FERRY_FAIL_AS(DTypeError, "nll_loss_backward: expected a floating gradient, but got ",
                    gi.dtype());
    } else {
      T* g = static_cast<T*>(gi.data_ptr());
      const int64_t s0 = gi.stride(0), s1 = gi.stride(1);
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t c = 0; c < classes; ++c) g[i * s0 + c * s1] = T(0);
      }
      const T* go = static_cast<const T*>(grad_out.data_ptr());
      for (int64_t i = 0; i < n; ++i) {
        const int64_t c = t[static_cast<size_t>(i)];
        if (c == ignore_index) continue;
        const double wc = weight.defined() ? convert_value<double>(static_cast<const T*>(
                                                 weight.data_ptr())[c * weight.stride(0)])
                                           : 1.0;
        const double upstream =
            per_element ? static_cast<double>(go[i * (grad_out.dim() > 0 ? grad_out.stride(0) : 0)])
                        : static_cast<double>(*go);
        g[i * s0 + c * s1] = static_cast<T>(-wc * upstream * scale);
      }
    }
  });
}

FERRY_REGISTER_DISPATCH(index_select_stub, DeviceType::CPU, &index_select);
FERRY_REGISTER_DISPATCH(index_add_stub, DeviceType::CPU, &index_add);
FERRY_REGISTER_DISPATCH(nll_loss_forward_stub, DeviceType::CPU, &nll_loss_forward);
FERRY_REGISTER_DISPATCH(nll_loss_backward_stub, DeviceType::CPU, &nll_loss_backward);

}  // namespace ferry::cpu
