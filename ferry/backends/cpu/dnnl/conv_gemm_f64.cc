// float64 convolutions as matrix products (nn_reference.h): per image and group, im2col lays the
// input windows out as a [C/g * kH * kW, oH * oW] matrix, and the packed float64 GEMM does the
// rest: forward W x col, backward input W^T x dY (then col2im adds the columns back into their
// windows), backward weight the sum over images of dY x col^T. Any input and output strides are
// accepted; an operand whose spatial dims cannot be read as one matrix dimension is copied first.
// The col matrix is built a band of output rows at a time, at most 32 MiB per thread.
// Images (and groups) are split over the pool, each with its own col matrix; with one of them,
// im2col's rows, col2im's channels and the product's blocks are split instead. Weight gradients
// sum the images in four fixed runs added in order, so results do not depend on the thread
// count.
#include <algorithm>
#include <atomic>
#include <vector>

#include "ferry/backends/cpu/dnnl/conv_geometry.h"
#include "ferry/backends/cpu/dnnl/nn_reference.h"
#include "ferry/backends/cpu/dnnl/nn_support.h"
#include "ferry/iter/parallel.h"

namespace ferry::cpu::reference {
namespace {

using View = View4<double>;

// Whether [.., .., oH, oW] reads as one dimension of stride(3).
bool spatial_as_one(const Tensor& t) {
  return t.size(2) == 1 || t.stride(2) == t.size(3) * t.stride(3);
}

// A [rows, cols] matrix at `data` for the GEMM's operands.
struct Matrix {
  const double* data;
  int64_t row_stride, col_stride;
};

// Output rows [y0, y1): the part of the col matrix built at once, so that it stays within the
// budget however large the image (im2col's matrix is kH * kW times the input).
struct Band {
  int64_t y0, y1;
  int64_t cols(const ConvGeometry& g) const { return (y1 - y0) * g.ow; }
};

std::atomic<int64_t> g_col_budget{int64_t{32} << 20};

int64_t band_rows(const ConvGeometry& g) {
  const int64_t row_bytes = std::max<int64_t>(g.rows() * g.ow, 1) * 8;
  return std::clamp<int64_t>(g_col_budget.load(std::memory_order_relaxed) / row_bytes, 1, g.oh);
}

// col[r][q] for r = (ci, i, j), q = (y - y0, x): the input under tap (i, j) of output (y, x) of
// image `image`, channel c0 + ci; zero in the padding.
void im2col(const View& x, const ConvGeometry& g, int64_t image, int64_t c0, Band band,
            double* col) {
  const int64_t cols = band.cols(g);
  parallel_for(0, g.rows(), nn::grain_for(cols), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t ci = r / (g.kh * g.kw), i = r / g.kw % g.kh, j = r % g.kw;
      double* row = col + r * cols;
      for (int64_t y = band.y0; y < band.y1; ++y) {
        double* dst = row + (y - band.y0) * g.ow;
        const int64_t ih = y * g.sh - g.ph + i * g.dh;
        if (ih < 0 || ih >= g.h) {
          std::fill(dst, dst + g.ow, 0.0);
          continue;
        }
        const double* src = x.at(image, c0 + ci, ih, 0);
        for (int64_t xo = 0; xo < g.ow; ++xo) {
          const int64_t iw = xo * g.sw - g.pw + j * g.dw;
          dst[xo] = iw >= 0 && iw < g.w ? src[iw * x.stride[3]] : 0.0;
        }
      }
    }
  });
}

// dx[image, c0 + ci, ih, iw] += col[r][q] over every tap and output of the band: im2col's
// adjoint. Channels are split over the pool: no two threads add into one element.
void col2im_add(const double* col, const ConvGeometry& g, int64_t image, int64_t c0, Band band,
                const View& dx) {
  const int64_t cols = band.cols(g);
  parallel_for(0, g.cg, nn::grain_for(g.kh * g.kw * cols), [&](int64_t begin, int64_t end) {
    for (int64_t ci = begin; ci < end; ++ci) {
      for (int64_t i = 0; i < g.kh; ++i) {
        for (int64_t j = 0; j < g.kw; ++j) {
          const double* row = col + ((ci * g.kh + i) * g.kw + j) * cols;
          for (int64_t y = band.y0; y < band.y1; ++y) {
            const int64_t ih = y * g.sh - g.ph + i * g.dh;
            if (ih < 0 || ih >= g.h) continue;
            double* dst = dx.at(image, c0 + ci, ih, 0);
            const double* src = row + (y - band.y0) * g.ow;
            for (int64_t xo = 0; xo < g.ow; ++xo) {
              const int64_t iw = xo * g.sw - g.pw + j * g.dw;
              if (iw >= 0 && iw < g.w) dst[iw * dx.stride[3]] += src[xo];
            }
          }
        }
      }
    }
  });
}

// c = a b + beta c over [m, k] x [k, n].
void product(Matrix a, Matrix b, double* c, int64_t c_row_stride, int64_t c_col_stride, int64_t m,
             int64_t n, int64_t k, double beta) {
  kernels::GemmBlockF64 blk{};
  blk.a = a.data, blk.a_row_stride = a.row_stride, blk.a_col_stride = a.col_stride;
  blk.b = b.data, blk.b_row_stride = b.row_stride, blk.b_col_stride = b.col_stride;
  blk.c = c, blk.c_row_stride = c_row_stride, blk.c_col_stride = c_col_stride;
  blk.m = m, blk.n = n, blk.k = k;
  blk.alpha = 1.0, blk.beta = beta;
  gemm_f64_matrix(blk);
}

}  // namespace

namespace detail {

int64_t set_conv_f64_col_budget(int64_t bytes) {
  return g_col_budget.exchange(std::max<int64_t>(bytes, 1));
}

}  // namespace detail

void conv2d_forward_f64_gemm(const Tensor& out, const Tensor& input, const Tensor& weight,
                             const Tensor& bias, const Conv2dParams& p) {
  const ConvGeometry g = conv_geometry(input, weight, out, p);
  const Tensor w = weight.contiguous();  // [O, C/g * kH * kW]
  const auto* wp = static_cast<const double*>(w.const_data_ptr());
  const auto* bp = bias.defined() ? static_cast<const double*>(bias.const_data_ptr()) : nullptr;
  const int64_t b_stride = bias.defined() ? bias.stride(0) : 0;
  const View x(input), y(out);
  // The product lands in `out` when its spatial dims read as one, else in a dense [og, oH * oW]
  // image that is then scattered.
  const bool direct = spatial_as_one(out);
  const int64_t band = band_rows(g);
  parallel_for(0, g.n * g.groups, 1, [&](int64_t begin, int64_t end) {
    std::vector<double> col(static_cast<size_t>(g.rows() * band * g.ow));
    std::vector<double> dense(direct ? 0 : static_cast<size_t>(g.og * g.cols()));
    for (int64_t task = begin; task < end; ++task) {
      const int64_t image = task / g.groups, group = task % g.groups, o0 = group * g.og;
      const Matrix wg{wp + o0 * g.rows(), g.rows(), 1};
      for (int64_t y0 = 0; y0 < g.oh; y0 += band) {
        const Band b{y0, std::min(g.oh, y0 + band)};
        im2col(x, g, image, group * g.cg, b, col.data());
        const Matrix cm{col.data(), b.cols(g), 1};
        if (direct) {
          product(wg, cm, y.at(image, o0, y0, 0), y.stride[1], y.stride[3], g.og, b.cols(g),
                  g.rows(), 0.0);
        } else {
          product(wg, cm, dense.data() + y0 * g.ow, g.cols(), 1, g.og, b.cols(g), g.rows(), 0.0);
        }
      }
      if (direct && bp == nullptr) continue;
      for (int64_t o = 0; o < g.og; ++o) {
        const double add = bp != nullptr ? bp[(o0 + o) * b_stride] : 0.0;
        const double* src = direct ? nullptr : dense.data() + o * g.cols();
        for (int64_t yy = 0; yy < g.oh; ++yy) {
          for (int64_t xx = 0; xx < g.ow; ++xx) {
            double* dst = y.at(image, o0 + o, yy, xx);
            *dst = (direct ? *dst : src[yy * g.ow + xx]) + add;
          }
        }
      }
    }
  });
}

void conv2d_backward_input_f64_gemm(const Tensor& grad_input, const Tensor& grad_out,
                                    const Tensor& weight, const Conv2dParams& p) {
  const ConvGeometry g = conv_geometry(grad_input, weight, grad_out, p);
  const Tensor w = weight.contiguous();
  const auto* wp = static_cast<const double*>(w.const_data_ptr());
  const Tensor dy = spatial_as_one(grad_out) ? grad_out : grad_out.contiguous();
  const View dyv(dy), dx(grad_input);
  Tensor(grad_input).zero_();  // a handle of the same storage: the front end passes const
  const int64_t band = band_rows(g);
  parallel_for(0, g.n * g.groups, 1, [&](int64_t begin, int64_t end) {
    std::vector<double> col(static_cast<size_t>(g.rows() * band * g.ow));
    for (int64_t task = begin; task < end; ++task) {
      const int64_t image = task / g.groups, group = task % g.groups;
      // col = W_g^T dY_g: W_g is [og, rows] row-major, read transposed.
      const Matrix wt{wp + group * g.og * g.rows(), 1, g.rows()};
      for (int64_t y0 = 0; y0 < g.oh; y0 += band) {
        const Band b{y0, std::min(g.oh, y0 + band)};
        const Matrix dyg{dyv.at(image, group * g.og, y0, 0), dyv.stride[1], dyv.stride[3]};
        product(wt, dyg, col.data(), b.cols(g), 1, g.rows(), b.cols(g), g.og, 0.0);
        col2im_add(col.data(), g, image, group * g.cg, b, dx);  // its image's group of channels
      }
    }
  });
}

void conv2d_backward_weight_f64_gemm(const Tensor& grad_weight, const Tensor& grad_bias,
                                     const Tensor& input, const Tensor& grad_out,
                                     const Conv2dParams& p) {
  const ConvGeometry g = conv_geometry(input, grad_weight, grad_out, p);
  const Tensor dy = spatial_as_one(grad_out) ? grad_out : grad_out.contiguous();
  const View dyv(dy), x(input);
  if (grad_weight.numel() > 0) {
    // dW_g = the sum over images of dY_g col^T. The images go in kPartials fixed runs, each
    // summed into its own dense [O, rows] (the first into grad_weight itself when it is dense),
    // and the runs are added in order: the same sums at any thread count.
    constexpr int64_t kPartials = 4;
    const int64_t partials = std::min(g.n, kPartials);
    const int64_t per = (g.n + partials - 1) / partials;
    const int64_t size = g.o * g.rows();
    const bool direct = grad_weight.is_contiguous();
    const Tensor dw = direct ? grad_weight : nn::host_empty(grad_weight.sizes(), kFloat64);
    std::vector<double> extra(static_cast<size_t>((partials - 1) * size));
    const int64_t band = band_rows(g);
    parallel_for(0, partials, 1, [&](int64_t begin, int64_t end) {
      std::vector<double> col(static_cast<size_t>(g.rows() * band * g.ow));
      for (int64_t part = begin; part < end; ++part) {
        double* sum = part == 0 ? dw.data_ptr<double>() : extra.data() + (part - 1) * size;
        const int64_t first = part * per, last = std::min(g.n, first + per);
        for (int64_t image = first; image < last; ++image) {
          for (int64_t group = 0; group < g.groups; ++group) {
            for (int64_t y0 = 0; y0 < g.oh; y0 += band) {
              const Band b{y0, std::min(g.oh, y0 + band)};
              im2col(x, g, image, group * g.cg, b, col.data());
              const Matrix dyg{dyv.at(image, group * g.og, y0, 0), dyv.stride[1], dyv.stride[3]};
              const Matrix colt{col.data(), 1, b.cols(g)};
              const bool overwrite = image == first && y0 == 0;
              product(dyg, colt, sum + group * g.og * g.rows(), g.rows(), 1, g.og, g.rows(),
                      b.cols(g), overwrite ? 0.0 : 1.0);
            }
          }
        }
      }
    });
    double* total = dw.data_ptr<double>();
    for (int64_t part = 1; part < partials; ++part) {
      const double* add = extra.data() + (part - 1) * size;
      for (int64_t e = 0; e < size; ++e) total[e] += add[e];
    }
    if (!direct) Tensor(grad_weight).copy_(dw);
  }
  if (grad_bias.defined()) {
    double* db = grad_bias.data_ptr<double>();
    const int64_t db_stride = grad_bias.stride(0);
    parallel_for(0, g.o, nn::grain_for(g.n * g.cols()), [&](int64_t begin, int64_t end) {
      for (int64_t o = begin; o < end; ++o) {
        double sum = 0;
        for (int64_t image = 0; image < g.n; ++image) {
          for (int64_t yy = 0; yy < g.oh; ++yy) {
            for (int64_t xx = 0; xx < g.ow; ++xx) sum += *dyv.at(image, o, yy, xx);
          }
        }
        db[o * db_stride] = sum;
      }
    });
  }
}

}  // namespace ferry::cpu::reference
