// Backward formulas of the linear-algebra operators: products of the gradient with the other
// operand transposed, through mm / bmm / matmul themselves, so that they run on every device and
// are differentiable again (create_graph). Broadcast batch dims are summed back by the engine.
#include "ferry/autograd/record.h"
#include "ferry/ops/linalg.h"
#include "ferry/ops/math.h"

namespace ferry::autograd {
namespace {

using Grads = const variable_list&;

// t as a matrix [product of the leading sizes, last size] (a view when the strides allow).
Tensor as_rows(const Tensor& t) {
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < t.dim(); ++d) rows *= t.size(d);
  return t.reshape({rows, t.dim() == 0 ? 1 : t.size(-1)});
}

Tensor scaled(const Tensor& t, double factor) { return factor == 1.0 ? t : t * factor; }

Tensor mm_autograd(const Tensor& a, const Tensor& b) {
  Recorder rec("MmBackward0", {&a, &b});
  Tensor out = below_autograd([&] { return mm(a, b); });
  if (rec) {
    const size_t sa = rec.node().needs_input_grad(1) ? rec.save(a) : 0;
    const size_t sb = rec.node().needs_input_grad(0) ? rec.save(b) : 0;
    rec.record(out, [sa, sb](FormulaNode& n, Grads g) -> variable_list {
      return {n.needs_input_grad(0) ? mm(g[0], n.saved(sb).t()) : Tensor(),
              n.needs_input_grad(1) ? mm(n.saved(sa).t(), g[0]) : Tensor()};
    });
  }
  return out;
}

Tensor bmm_autograd(const Tensor& a, const Tensor& b) {
  Recorder rec("BmmBackward0", {&a, &b});
  Tensor out = below_autograd([&] { return bmm(a, b); });
  if (rec) {
    const size_t sa = rec.node().needs_input_grad(1) ? rec.save(a) : 0;
    const size_t sb = rec.node().needs_input_grad(0) ? rec.save(b) : 0;
    rec.record(out, [sa, sb](FormulaNode& n, Grads g) -> variable_list {
      return {n.needs_input_grad(0) ? bmm(g[0], n.saved(sb).transpose(1, 2)) : Tensor(),
              n.needs_input_grad(1) ? bmm(n.saved(sa).transpose(1, 2), g[0]) : Tensor()};
    });
  }
  return out;
}

Tensor addmm_autograd(const Tensor& self, const Tensor& m1, const Tensor& m2, const Scalar& beta,
                      const Scalar& alpha) {
  Recorder rec("AddmmBackward0", {&self, &m1, &m2});
  Tensor out = below_autograd([&] { return addmm(self, m1, m2, beta, alpha); });
  if (rec) {
    const size_t s1 = rec.node().needs_input_grad(2) ? rec.save(m1) : 0;
    const size_t s2 = rec.node().needs_input_grad(1) ? rec.save(m2) : 0;
    const double b = beta.to<double>(), a = alpha.to<double>();
    rec.record(out, [s1, s2, b, a](FormulaNode& n, Grads g) -> variable_list {
      return {n.needs_input_grad(0) ? scaled(g[0], b) : Tensor(),
              n.needs_input_grad(1) ? scaled(mm(g[0], n.saved(s2).t()), a) : Tensor(),
              n.needs_input_grad(2) ? scaled(mm(n.saved(s1).t(), g[0]), a) : Tensor()};
    });
  }
  return out;
}

Tensor linear_autograd(const Tensor& input, const Tensor& weight,
                       const std::optional<Tensor>& bias) {
  const Tensor b = bias.value_or(Tensor());
  Recorder rec("LinearBackward0", {&input, &weight, &b});
  Tensor out = below_autograd([&] { return linear(input, weight, bias); });
  if (rec) {
    const size_t si = rec.node().needs_input_grad(1) ? rec.save(input) : 0;
    const size_t sw = rec.node().needs_input_grad(0) ? rec.save(weight) : 0;
    rec.record(out, [si, sw](FormulaNode& n, Grads g) -> variable_list {
      // The gradient's rows, [rows, out_features], for the weight and bias sums.
      const Tensor g2 = as_rows(g[0]);
      return {n.needs_input_grad(0) ? matmul(g[0], n.saved(sw)) : Tensor(),
              n.needs_input_grad(1) ? mm(g2.t(), as_rows(n.saved(si))) : Tensor(),
              n.needs_input_grad(2) ? g2.sum({0}) : Tensor()};
    });
  }
  return out;
}

// matmul: the operands as matrices (a vector is a row on the left, a column on the right) and
// the gradient with those dims put back; then grad_a = g @ b^T and grad_b = a^T @ g, with the
// vector dims removed again. A matrix b under a batched a gets a^T @ g folded into one mm.
Tensor matmul_autograd(const Tensor& a, const Tensor& b) {
  Recorder rec("MatmulBackward0", {&a, &b});
  Tensor out = below_autograd([&] { return matmul(a, b); });
  if (rec) {
    const size_t sa = rec.node().needs_input_grad(1) ? rec.save(a) : 0;
    const size_t sb = rec.node().needs_input_grad(0) ? rec.save(b) : 0;
    const int64_t da = a.dim(), db = b.dim();
    rec.record(out, [sa, sb, da, db](FormulaNode& n, Grads g) -> variable_list {
      Tensor g2 = g[0];
      if (da == 1) g2 = db > 1 ? g2.unsqueeze(-2) : g2.unsqueeze(g2.dim());
      if (db == 1) g2 = g2.unsqueeze(-1);
      Tensor grad_a, grad_b;
      if (n.needs_input_grad(0)) {
        const Tensor b2 = db == 1 ? n.saved(sb).unsqueeze(-1) : n.saved(sb);
        grad_a = matmul(g2, b2.transpose(-1, -2));
        if (da == 1) grad_a = grad_a.squeeze(-2);
      }
      if (n.needs_input_grad(1)) {
        const Tensor a2 = da == 1 ? n.saved(sa).unsqueeze(0) : n.saved(sa);
        if (db <= 2) {
          grad_b = mm(as_rows(a2).t(), as_rows(g2));
        } else {
          grad_b = matmul(a2.transpose(-1, -2), g2);
        }
        if (db == 1) grad_b = grad_b.squeeze(-1);
      }
      return {grad_a, grad_b};
    });
  }
  return out;
}

}  // namespace

FERRY_LIBRARY(ferry, m) {
  impl_autograd(m, "mm", &mm_autograd, "MmBackward0");
  impl_autograd(m, "bmm", &bmm_autograd, "BmmBackward0");
  impl_autograd(m, "addmm", &addmm_autograd, "AddmmBackward0");
  impl_autograd(m, "linear", &linear_autograd, "LinearBackward0");
  impl_autograd(m, "matmul", &matmul_autograd, "MatmulBackward0");
}

}  // namespace ferry::autograd
