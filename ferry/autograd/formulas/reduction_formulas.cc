// Backward formulas of the reductions and of softmax / log_softmax.
#include <algorithm>

#include "ferry/autograd/fallback.h"
#include "ferry/autograd/record.h"
#include "ferry/ops/factories.h"
#include "ferry/ops/math.h"

namespace ferry::autograd {
namespace {

using Grads = const variable_list&;

// g (the reduced result's gradient) broadcast back over `sizes`: the reduced dims are put back
// (when keepdim dropped them) and expanded.
Tensor unreduce(const Tensor& g, const DimVector& sizes, const std::vector<int64_t>& dims,
                bool keepdim) {
  Tensor out = g;
  if (!keepdim) {
    for (int64_t d : dims) out = out.unsqueeze(d);  // dims are sorted ascending
  }
  return out.expand(sizes);
}

int64_t count(const DimVector& sizes, const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= sizes[static_cast<size_t>(d)];
  return n;
}

Tensor sum_dim_autograd(const Tensor& self, IntArrayRef dims, bool keepdim,
                        std::optional<ScalarType> dtype) {
  Recorder rec("SumBackward1", {&self});
  Tensor out = below_autograd([&] { return sum(self, dims, keepdim, dtype); });
  if (rec) {
    const DimVector sizes(self.sizes());
    const std::vector<int64_t> d = reduction_dims(dims, self.dim(), "sum");
    rec.record(out, [sizes, d, keepdim](FormulaNode&, Grads g) -> variable_list {
      return {unreduce(g[0], sizes, d, keepdim)};
    });
  }
  return out;
}

Tensor sum_autograd(const Tensor& self, std::optional<ScalarType> dtype) {
  Recorder rec("SumBackward0", {&self});
  Tensor out = below_autograd([&] { return sum(self, dtype); });
  if (rec) {
    const DimVector sizes(self.sizes());
    rec.record(out,
               [sizes](FormulaNode&, Grads g) -> variable_list { return {g[0].expand(sizes)}; });
  }
  return out;
}

Tensor mean_dim_autograd(const Tensor& self, IntArrayRef dims, bool keepdim,
                         std::optional<ScalarType> dtype) {
  Recorder rec("MeanBackward1", {&self});
  Tensor out = below_autograd([&] { return mean(self, dims, keepdim, dtype); });
  if (rec) {
    const DimVector sizes(self.sizes());
    const std::vector<int64_t> d = reduction_dims(dims, self.dim(), "mean");
    const double n = static_cast<double>(count(sizes, d));
    rec.record(out, [sizes, d, keepdim, n](FormulaNode&, Grads g) -> variable_list {
      return {unreduce(g[0] / n, sizes, d, keepdim)};
    });
  }
  return out;
}

Tensor mean_autograd(const Tensor& self, std::optional<ScalarType> dtype) {
  Recorder rec("MeanBackward0", {&self});
  Tensor out = below_autograd([&] { return mean(self, dtype); });
  if (rec) {
    const DimVector sizes(self.sizes());
    const double n = static_cast<double>(self.numel());
    rec.record(out, [sizes, n](FormulaNode&, Grads g) -> variable_list {
      return {(g[0] / n).expand(sizes)};
    });
  }
  return out;
}

Tensor amax_autograd(const Tensor& self, IntArrayRef dims, bool keepdim) {
  // The gradient is shared evenly by the elements equal to the maximum, as PyTorch does.
  Recorder rec("AmaxBackward0", {&self});
  Tensor out = below_autograd([&] { return amax(self, dims, keepdim); });
  if (rec) {
    const size_t sx = rec.save(self);
    rec.record(out, nullptr);
    const size_t sy = rec.save_output(out);
    const DimVector sizes(self.sizes());
    const std::vector<int64_t> d = reduction_dims(dims, self.dim(), "amax");
    rec.node().set_formula([sx, sy, sizes, d, keepdim](FormulaNode& n, Grads g) -> variable_list {
      const Tensor mask = eq(n.saved(sx), unreduce(n.saved(sy), sizes, d, keepdim));
      const Tensor m = mask.to(g[0].dtype());
      const Tensor share = unreduce(g[0], sizes, d, keepdim) / m.sum(d, /*keepdim=*/true);
      return {share * m};
    });
  }
  return out;
}

Tensor softmax_autograd(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype) {
  Recorder rec("SoftmaxBackward0", {&self});
  Tensor out = below_autograd([&] { return softmax(self, dim, dtype); });
  if (rec) {
    rec.record(out, nullptr);
    const size_t sy = rec.save_output(out);
    rec.node().set_formula([sy, dim](FormulaNode& n, Grads g) -> variable_list {
      return {softmax_backward_data(g[0], n.saved(sy), dim)};
    });
  }
  return out;
}

Tensor log_softmax_autograd(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype) {
  Recorder rec("LogSoftmaxBackward0", {&self});
  Tensor out = below_autograd([&] { return log_softmax(self, dim, dtype); });
  if (rec) {
    rec.record(out, nullptr);
    const size_t sy = rec.save_output(out);
    rec.node().set_formula([sy, dim](FormulaNode& n, Grads g) -> variable_list {
      return {log_softmax_backward_data(g[0], n.saved(sy), dim)};
    });
  }
  return out;
}

// Gradients of the softmax backwards, for second derivatives: with y the softmax output,
// gi = y * (g - sum(g * y)); log_softmax: gi = g - exp(y) * sum(g).
Tensor softmax_backward_autograd(const Tensor& grad, const Tensor& output, int64_t dim) {
  Recorder rec("SoftmaxBackwardDataBackward0", {&grad, &output});
  Tensor out = below_autograd([&] { return softmax_backward_data(grad, output, dim); });
  if (rec) {
    const size_t sg = rec.save(grad), sy = rec.save(output);
    rec.record(out, [sg, sy, dim](FormulaNode& n, Grads g) -> variable_list {
      const Tensor gy = n.saved(sg), y = n.saved(sy), gg = g[0];
      const Tensor d_grad = softmax_backward_data(gg, y, dim);
      // d/dy [y * (gy - sum(gy * y))] applied to gg.
      const Tensor s = (gy * y).sum({dim}, true);
      const Tensor d_out = gg * (gy - s) - gy * (gg * y).sum({dim}, true);
      return {n.needs_input_grad(0) ? d_grad : Tensor(), n.needs_input_grad(1) ? d_out : Tensor()};
    });
  }
  return out;
}

Tensor log_softmax_backward_autograd(const Tensor& grad, const Tensor& output, int64_t dim) {
  Recorder rec("LogSoftmaxBackwardDataBackward0", {&grad, &output});
  Tensor out = below_autograd([&] { return log_softmax_backward_data(grad, output, dim); });
  if (rec) {
    const size_t sg = rec.save(grad), sy = rec.save(output);
    rec.record(out, [sg, sy, dim](FormulaNode& n, Grads g) -> variable_list {
      const Tensor gy = n.saved(sg), y = n.saved(sy), gg = g[0];
      const Tensor p = exp(y);
      const Tensor d_grad = gg - (gg * p).sum({dim}, true);
      const Tensor d_out = -gg * p * gy.sum({dim}, true);
      return {n.needs_input_grad(0) ? d_grad : Tensor(), n.needs_input_grad(1) ? d_out : Tensor()};
    });
  }
  return out;
}

}  // namespace

FERRY_LIBRARY(ferry, m) {
  impl_autograd(m, "sum", &sum_autograd, "SumBackward0");
  impl_autograd(m, "sum.dim_IntList", &sum_dim_autograd, "SumBackward1");
  impl_autograd(m, "mean", &mean_autograd, "MeanBackward0");
  impl_autograd(m, "mean.dim", &mean_dim_autograd, "MeanBackward1");
  impl_autograd(m, "amax", &amax_autograd, "AmaxBackward0");
  impl_autograd(m, "softmax.int", &softmax_autograd, "SoftmaxBackward0");
  impl_autograd(m, "log_softmax.int", &log_softmax_autograd, "LogSoftmaxBackward0");
  impl_autograd(m, "_softmax_backward_data", &softmax_backward_autograd,
                "SoftmaxBackwardDataBackward0");
  impl_autograd(m, "_log_softmax_backward_data", &log_softmax_backward_autograd,
                "LogSoftmaxBackwardDataBackward0");
  register_non_differentiable(m, "argmax");
}

}  // namespace ferry::autograd
