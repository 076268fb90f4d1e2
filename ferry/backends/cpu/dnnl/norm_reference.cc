// The portable float64 loops of batch norm ([N, C, S] views), layer norm ([R, D] views) and
// softmax ([outer, axis, inner] views): two-pass statistics in double, PyTorch's gradient
// formulas, any strides. Channels, rows or softmax lanes split over ferry's pool.
#include <cmath>
#include <limits>
#include <vector>

#include "ferry/backends/cpu/dnnl/nn_reference.h"
#include "ferry/backends/cpu/dnnl/nn_support.h"
#include "ferry/iter/parallel.h"

namespace ferry::cpu::reference {
namespace {

// A 1-d double vector over any stride; undefined tensors read as `fallback` and ignore writes.
struct Vec {
  double* data = nullptr;
  int64_t stride = 0;
  double fallback = 0;
  Vec(const Tensor& t, double fallback_value) : fallback(fallback_value) {
    if (t.defined()) {
      data = static_cast<double*>(t.data_ptr());
      stride = t.stride(0);
    }
  }
  double get(int64_t i) const { return data ? data[i * stride] : fallback; }
  void set(int64_t i, double v) const {
    if (data) data[i * stride] = v;
  }
};

struct Mat3 {
  double* data;
  int64_t n0, n1, n2, s0, s1, s2;
  explicit Mat3(const Tensor& t)
      : data(static_cast<double*>(t.data_ptr())),
        n0(t.size(0)),
        n1(t.size(1)),
        n2(t.size(2)),
        s0(t.stride(0)),
        s1(t.stride(1)),
        s2(t.stride(2)) {}
  double& operator()(int64_t a, int64_t b, int64_t c) const {
    return data[a * s0 + b * s1 + c * s2];
  }
};

struct Mat2 {
  double* data;
  int64_t rows, cols, sr, sc;
  explicit Mat2(const Tensor& t)
      : data(static_cast<double*>(t.data_ptr())),
        rows(t.size(0)),
        cols(t.size(1)),
        sr(t.stride(0)),
        sc(t.stride(1)) {}
  double& operator()(int64_t r, int64_t c) const { return data[r * sr + c * sc]; }
};

}  // namespace

void batch_norm_forward(const Tensor& out, const Tensor& save_mean, const Tensor& save_invstd,
                        const Tensor& x, const Tensor& weight, const Tensor& bias,
                        const Tensor& running_mean, const Tensor& running_var, bool training,
                        double momentum, double eps) {
  const Mat3 in(x), y(out);
  const Vec w(weight, 1), b(bias, 0), sm(save_mean, 0), si(save_invstd, 0);
  const Vec rm(running_mean, 0), rv(running_var, 1);
  const int64_t count = in.n0 * in.n2;
  parallel_for(0, in.n1, nn::grain_for(count), [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      double mean, invstd;
      if (training) {
        double sum = 0, sq = 0;
        for (int64_t n = 0; n < in.n0; ++n) {
          for (int64_t s = 0; s < in.n2; ++s) sum += in(n, c, s);
        }
        mean = sum / static_cast<double>(count);
        for (int64_t n = 0; n < in.n0; ++n) {
          for (int64_t s = 0; s < in.n2; ++s) sq += (in(n, c, s) - mean) * (in(n, c, s) - mean);
        }
        const double var = sq / static_cast<double>(count);
        invstd = 1.0 / std::sqrt(var + eps);
        sm.set(c, mean);
        si.set(c, invstd);
        rm.set(c, (1 - momentum) * rm.get(c) + momentum * mean);
        rv.set(c, (1 - momentum) * rv.get(c) +
                      momentum * sq / static_cast<double>(std::max<int64_t>(count - 1, 1)));
      } else {
        mean = rm.get(c);
        invstd = 1.0 / std::sqrt(rv.get(c) + eps);
      }
      const double scale = w.get(c) * invstd, shift = b.get(c) - mean * scale;
      for (int64_t n = 0; n < in.n0; ++n) {
        for (int64_t s = 0; s < in.n2; ++s) y(n, c, s) = in(n, c, s) * scale + shift;
      }
    }
  });
}

void batch_norm_backward(const Tensor& grad_input, const Tensor& grad_weight,
                         const Tensor& grad_bias, const Tensor& grad_out, const Tensor& x,
                         const Tensor& weight, const Tensor& mean, const Tensor& invstd,
                         bool training) {
  const Mat3 in(x), dy(grad_out);
  const Vec w(weight, 1), m(mean, 0), is(invstd, 1), dw(grad_weight, 0), db(grad_bias, 0);
  const int64_t count = in.n0 * in.n2;
  parallel_for(0, in.n1, nn::grain_for(count), [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      const double mu = m.get(c), inv = is.get(c);
      double sum_dy = 0, sum_dy_xhat = 0;
      for (int64_t n = 0; n < in.n0; ++n) {
        for (int64_t s = 0; s < in.n2; ++s) {
          sum_dy += dy(n, c, s);
          sum_dy_xhat += dy(n, c, s) * (in(n, c, s) - mu) * inv;
        }
      }
      dw.set(c, sum_dy_xhat);
      db.set(c, sum_dy);
      if (!grad_input.defined()) continue;
      const Mat3 dx(grad_input);
      const double k = w.get(c) * inv, inv_count = 1.0 / static_cast<double>(count);
      for (int64_t n = 0; n < in.n0; ++n) {
        for (int64_t s = 0; s < in.n2; ++s) {
          const double g = dy(n, c, s);
          dx(n, c, s) = training ? k * (g - sum_dy * inv_count -
                                        (in(n, c, s) - mu) * inv * sum_dy_xhat * inv_count)
                                 : k * g;
        }
      }
    }
  });
}

void layer_norm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                        const Tensor& weight, const Tensor& bias, double eps) {
  const Mat2 in(x), y(out);
  const Vec w(weight, 1), b(bias, 0), mv(mean, 0), rv(rstd, 0);
  parallel_for(0, in.rows, nn::grain_for(in.cols), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      double sum = 0, sq = 0;
      for (int64_t d = 0; d < in.cols; ++d) sum += in(r, d);
      const double mu = sum / static_cast<double>(in.cols);
      for (int64_t d = 0; d < in.cols; ++d) sq += (in(r, d) - mu) * (in(r, d) - mu);
      const double inv = 1.0 / std::sqrt(sq / static_cast<double>(in.cols) + eps);
      mv.set(r, mu);
      rv.set(r, inv);
      for (int64_t d = 0; d < in.cols; ++d) y(r, d) = (in(r, d) - mu) * inv * w.get(d) + b.get(d);
    }
  });
}

void layer_norm_backward(const Tensor& grad_input, const Tensor& grad_weight,
                         const Tensor& grad_bias, const Tensor& grad_out, const Tensor& x,
                         const Tensor& mean, const Tensor& rstd, const Tensor& weight) {
  const Mat2 in(x), dy(grad_out);
  const Vec w(weight, 1), mv(mean, 0), rv(rstd, 1), dw(grad_weight, 0), db(grad_bias, 0);
  const double inv_d = 1.0 / static_cast<double>(in.cols);
  if (grad_input.defined()) {
    const Mat2 dx(grad_input);
    parallel_for(0, in.rows, nn::grain_for(in.cols), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const double mu = mv.get(r), inv = rv.get(r);
        double a = 0, b = 0;
        for (int64_t d = 0; d < in.cols; ++d) {
          const double gw = dy(r, d) * w.get(d);
          a += gw;
          b += gw * (in(r, d) - mu) * inv;
        }
        for (int64_t d = 0; d < in.cols; ++d) {
          const double xhat = (in(r, d) - mu) * inv;
          dx(r, d) = inv * (dy(r, d) * w.get(d) - a * inv_d - xhat * b * inv_d);
        }
      }
    });
  }
  if (!grad_weight.defined() && !grad_bias.defined()) return;
  parallel_for(0, in.cols, nn::grain_for(in.rows), [&](int64_t begin, int64_t end) {
    for (int64_t d = begin; d < end; ++d) {
      double sw = 0, sb = 0;
      for (int64_t r = 0; r < in.rows; ++r) {
        sw += dy(r, d) * (in(r, d) - mv.get(r)) * rv.get(r);
        sb += dy(r, d);
      }
      dw.set(d, sw);
      db.set(d, sb);
    }
  });
}

void softmax_forward(const Tensor& out, const Tensor& x, bool log) {
  const Mat3 in(x), y(out);
  parallel_for(0, in.n0 * in.n2, nn::grain_for(in.n1), [&](int64_t begin, int64_t end) {
    for (int64_t lane = begin; lane < end; ++lane) {
      const int64_t o = lane / in.n2, i = lane % in.n2;
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t a = 0; a < in.n1; ++a) mx = std::max(mx, in(o, a, i));
      double sum = 0;
      for (int64_t a = 0; a < in.n1; ++a) sum += std::exp(in(o, a, i) - mx);
      const double log_sum = std::log(sum);
      for (int64_t a = 0; a < in.n1; ++a) {
        y(o, a, i) = log ? in(o, a, i) - mx - log_sum : std::exp(in(o, a, i) - mx) / sum;
      }
    }
  });
}

void softmax_backward(const Tensor& grad_input, const Tensor& grad_out, const Tensor& y, bool log) {
  const Mat3 dx(grad_input), dy(grad_out), out(y);
  parallel_for(0, out.n0 * out.n2, nn::grain_for(out.n1), [&](int64_t begin, int64_t end) {
    for (int64_t lane = begin; lane < end; ++lane) {
      const int64_t o = lane / out.n2, i = lane % out.n2;
      double sum = 0;
      for (int64_t a = 0; a < out.n1; ++a) sum += log ? dy(o, a, i) : dy(o, a, i) * out(o, a, i);
      for (int64_t a = 0; a < out.n1; ++a) {
        dx(o, a, i) =
            log ? dy(o, a, i) - std::exp(out(o, a, i)) * sum : out(o, a, i) * (dy(o, a, i) - sum);
      }
    }
  });
}

}  // namespace ferry::cpu::reference
