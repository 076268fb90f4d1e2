// Backward formulas of the elementwise operators, registered at every autograd key. Each kernel
// records a FormulaNode (named as PyTorch names it) and runs the operator below autograd;
// formulas are written with ferry's operators, so a backward with create_graph is itself
// recorded. Broadcasting and dtype differences of the results are left to the engine (sum_to,
// cast), as in PyTorch.
#include "ferry/autograd/fallback.h"
#include "ferry/autograd/record.h"
#include "ferry/ops/factories.h"
#include "ferry/ops/math.h"

namespace ferry::autograd {
namespace {

using Grads = const variable_list&;

// ---- binary -----------------------------------------------------------------------------------

Tensor add_autograd(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  Recorder rec("AddBackward0", {&a, &b});
  Tensor out = below_autograd([&] { return add(a, b, alpha); });
  if (rec) {
    rec.record(out, [alpha](FormulaNode& n, Grads g) -> variable_list {
      const bool unit = alpha.to<double>() == 1.0;
      return {n.needs_input_grad(0) ? g[0] : Tensor(),
              n.needs_input_grad(1) ? (unit ? g[0] : g[0] * alpha) : Tensor()};
    });
  }
  return out;
}

Tensor sub_autograd(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  Recorder rec("SubBackward0", {&a, &b});
  Tensor out = below_autograd([&] { return sub(a, b, alpha); });
  if (rec) {
    rec.record(out, [alpha](FormulaNode& n, Grads g) -> variable_list {
      const bool unit = alpha.to<double>() == 1.0;
      return {n.needs_input_grad(0) ? g[0] : Tensor(),
              n.needs_input_grad(1) ? (unit ? -g[0] : g[0] * -alpha.to<double>()) : Tensor()};
    });
  }
  return out;
}

Tensor mul_autograd(const Tensor& a, const Tensor& b) {
  Recorder rec("MulBackward0", {&a, &b});
  Tensor out = below_autograd([&] { return mul(a, b); });
  if (rec) {
    const size_t sa = rec.node().needs_input_grad(1) ? rec.save(a) : 0;
    const size_t sb = rec.node().needs_input_grad(0) ? rec.save(b) : 0;
    rec.record(out, [sa, sb](FormulaNode& n, Grads g) -> variable_list {
      return {n.needs_input_grad(0) ? g[0] * n.saved(sb) : Tensor(),
              n.needs_input_grad(1) ? g[0] * n.saved(sa) : Tensor()};
    });
  }
  return out;
}

Tensor div_autograd(const Tensor& a, const Tensor& b) {
  Recorder rec("DivBackward0", {&a, &b});
  Tensor out = below_autograd([&] { return div(a, b); });
  if (rec) {
    const size_t sa = rec.save(a), sb = rec.save(b);
    rec.record(out, [sa, sb](FormulaNode& n, Grads g) -> variable_list {
      const Tensor bb = n.saved(sb);
      return {n.needs_input_grad(0) ? g[0] / bb : Tensor(),
              n.needs_input_grad(1) ? -g[0] * n.saved(sa) / (bb * bb) : Tensor()};
    });
  }
  return out;
}

// ---- with a scalar --------------------------------------------------------------------------

Tensor add_scalar_autograd(const Tensor& a, const Scalar& b, const Scalar& alpha) {
  Recorder rec("AddBackward1", {&a});
  Tensor out = below_autograd([&] { return add(a, b, alpha); });
  if (rec) rec.record(out, [](FormulaNode&, Grads g) -> variable_list { return {g[0]}; });
  return out;
}

Tensor sub_scalar_autograd(const Tensor& a, const Scalar& b, const Scalar& alpha) {
  Recorder rec("SubBackward1", {&a});
  Tensor out = below_autograd([&] { return sub(a, b, alpha); });
  if (rec) rec.record(out, [](FormulaNode&, Grads g) -> variable_list { return {g[0]}; });
  return out;
}

Tensor rsub_autograd(const Tensor& a, const Scalar& b, const Scalar& alpha) {
  Recorder rec("RsubBackward1", {&a});
  Tensor out = below_autograd([&] { return rsub(a, b, alpha); });
  if (rec) {
    rec.record(out, [alpha](FormulaNode&, Grads g) -> variable_list {
      return {g[0] * -alpha.to<double>()};
    });
  }
  return out;
}

Tensor mul_scalar_autograd(const Tensor& a, const Scalar& b) {
  Recorder rec("MulBackward1", {&a});
  Tensor out = below_autograd([&] { return mul(a, b); });
  if (rec) rec.record(out, [b](FormulaNode&, Grads g) -> variable_list { return {g[0] * b}; });
  return out;
}

Tensor div_scalar_autograd(const Tensor& a, const Scalar& b) {
  Recorder rec("DivBackward1", {&a});
  Tensor out = below_autograd([&] { return div(a, b); });
  if (rec) rec.record(out, [b](FormulaNode&, Grads g) -> variable_list { return {g[0] / b}; });
  return out;
}

Tensor rdiv_autograd(const Tensor& a, const Scalar& b) {
  // out = b / a: d/da = -b / a^2 = -out / a.
  Recorder rec("RdivBackward0", {&a});
  Tensor out = below_autograd([&] { return rdiv(a, b); });
  if (rec) {
    const size_t sa = rec.save(a);
    const size_t so = rec.save_output(out);
    rec.record(out, [sa, so](FormulaNode& n, Grads g) -> variable_list {
      return {-g[0] * n.saved(so) / n.saved(sa)};
    });
  }
  return out;
}

// ---- unary ----------------------------------------------------------------------------------

// Sets formula(g, x, y) as rec's formula, x and y unpacked from the saved slots given (else
// undefined).
template <typename Formula>
void set_unary_formula(Recorder& rec, const size_t* sx, const size_t* sy, Formula formula) {
  const bool save_input = sx != nullptr, save_result = sy != nullptr;
  const size_t ix = save_input ? *sx : 0, iy = save_result ? *sy : 0;
  rec.node().set_formula(
      [ix, iy, save_input, save_result, formula](FormulaNode& n, Grads g) -> variable_list {
        const Tensor x = save_input ? n.saved(ix) : Tensor();
        const Tensor y = save_result ? n.saved(iy) : Tensor();
        return {formula(g[0], x, y)};
      });
}

// A unary op whose formula needs the input (`x`) or the result (`y`).
template <typename Forward, typename Formula>
Tensor unary_autograd(const char* name, const Tensor& a, bool save_input, bool save_result,
                      Forward forward, Formula formula) {
  Recorder rec(name, {&a});
  Tensor out = below_autograd([&] { return forward(a); });
  if (rec) {
    const size_t sx = save_input ? rec.save(a) : 0;
    // The node must be the output's grad_fn before the output is saved.
    rec.record(out, nullptr);
    const size_t sy = save_result ? rec.save_output(out) : 0;
    set_unary_formula(rec, save_input ? &sx : nullptr, save_result ? &sy : nullptr, formula);
  }
  return out;
}

Tensor neg_autograd(const Tensor& a) {
  return unary_autograd(
      "NegBackward0", a, false, false, [](const Tensor& x) { return neg(x); },
      [](const Tensor& g, const Tensor&, const Tensor&) { return -g; });
}
Tensor exp_autograd(const Tensor& a) {
  return unary_autograd(
      "ExpBackward0", a, false, true, [](const Tensor& x) { return exp(x); },
      [](const Tensor& g, const Tensor&, const Tensor& y) { return g * y; });
}
Tensor log_autograd(const Tensor& a) {
  return unary_autograd(
      "LogBackward0", a, true, false, [](const Tensor& x) { return log(x); },
      [](const Tensor& g, const Tensor& x, const Tensor&) { return g / x; });
}
Tensor sqrt_autograd(const Tensor& a) {
  return unary_autograd(
      "SqrtBackward0", a, false, true, [](const Tensor& x) { return sqrt(x); },
      [](const Tensor& g, const Tensor&, const Tensor& y) { return g / (y * 2); });
}
Tensor rsqrt_autograd(const Tensor& a) {
  return unary_autograd(
      "RsqrtBackward0", a, false, true, [](const Tensor& x) { return rsqrt(x); },
      [](const Tensor& g, const Tensor&, const Tensor& y) { return g * (y * y * y) * -0.5; });
}
Tensor tanh_autograd(const Tensor& a) {
  return unary_autograd(
      "TanhBackward0", a, false, true, [](const Tensor& x) { return tanh(x); },
      [](const Tensor& g, const Tensor&, const Tensor& y) { return tanh_backward(g, y); });
}
Tensor sigmoid_autograd(const Tensor& a) {
  return unary_autograd(
      "SigmoidBackward0", a, false, true, [](const Tensor& x) { return sigmoid(x); },
      [](const Tensor& g, const Tensor&, const Tensor& y) { return sigmoid_backward(g, y); });
}
Tensor relu_autograd(const Tensor& a) {
  return unary_autograd(
      "ReluBackward0", a, false, true, [](const Tensor& x) { return relu(x); },
      [](const Tensor& g, const Tensor&, const Tensor& y) { return threshold_backward(g, y, 0); });
}
Tensor abs_autograd(const Tensor& a) {
  return unary_autograd(
      "AbsBackward0", a, true, false, [](const Tensor& x) { return abs(x); },
      [](const Tensor& g, const Tensor& x, const Tensor&) { return g * sign(x); });
}
// sign is flat almost everywhere: its gradient is zero (PyTorch records it, so results that use
// it still require grad).
Tensor sign_autograd(const Tensor& a) {
  return unary_autograd(
      "SignBackward0", a, false, false, [](const Tensor& x) { return sign(x); },
      [](const Tensor& g, const Tensor&, const Tensor&) { return zeros_like(g); });
}
Tensor gelu_autograd(const Tensor& a, std::string_view approximate) {
  const std::string mode(approximate);
  return unary_autograd(
      "GeluBackward0", a, true, false, [&](const Tensor& x) { return gelu(x, mode); },
      [mode](const Tensor& g, const Tensor& x, const Tensor&) {
        return gelu_backward(g, x, mode);
      });
}
Tensor pow_autograd(const Tensor& a, const Scalar& exponent) {
  const double e = exponent.to<double>();
  return unary_autograd(
      "PowBackward0", a, true, false, [&](const Tensor& x) { return pow(x, exponent); },
      [e](const Tensor& g, const Tensor& x, const Tensor&) {
        if (e == 0.0) return zeros_like(g);
        if (e == 1.0) return g;
        if (e == 2.0) return g * x * 2.0;
        return g * pow(x, e - 1.0) * e;
      });
}

Tensor where_autograd(const Tensor& condition, const Tensor& a, const Tensor& b) {
  Recorder rec("WhereBackward0", {&condition, &a, &b});
  Tensor out = below_autograd([&] { return where(condition, a, b); });
  if (rec) {
    const size_t sc = rec.save(condition);
    rec.record(out, [sc](FormulaNode& n, Grads g) -> variable_list {
      const Tensor c = n.saved(sc);
      const Tensor zero = zeros_like(g[0]);
      return {Tensor(), n.needs_input_grad(1) ? where(c, g[0], zero) : Tensor(),
              n.needs_input_grad(2) ? where(c, zero, g[0]) : Tensor()};
    });
  }
  return out;
}

// ---- in place -------------------------------------------------------------------------------

// An in-place binary op self <- f(self, other) whose gradient for self is g * dself and for
// other g * dother, computed from what the formula saved before the write.
Tensor& add_inplace_autograd(Tensor& self, const Tensor& other, const Scalar& alpha) {
  check_inplace(self, "add_");
  Recorder rec("AddBackward0", {&self, &other});
  below_autograd([&] { return add_(self, other, alpha); });
  if (rec) {
    rec.record_inplace(self, [alpha](FormulaNode& n, Grads g) -> variable_list {
      return {n.needs_input_grad(0) ? g[0] : Tensor(),
              n.needs_input_grad(1) ? g[0] * alpha : Tensor()};
    });
  }
  return self;
}

Tensor& sub_inplace_autograd(Tensor& self, const Tensor& other, const Scalar& alpha) {
  check_inplace(self, "sub_");
  Recorder rec("SubBackward0", {&self, &other});
  below_autograd([&] { return sub_(self, other, alpha); });
  if (rec) {
    rec.record_inplace(self, [alpha](FormulaNode& n, Grads g) -> variable_list {
      return {n.needs_input_grad(0) ? g[0] : Tensor(),
              n.needs_input_grad(1) ? g[0] * -alpha.to<double>() : Tensor()};
    });
  }
  return self;
}

Tensor& mul_inplace_autograd(Tensor& self, const Tensor& other) {
  check_inplace(self, "mul_");
  Recorder rec("MulBackward0", {&self, &other});
  // other's gradient needs self's value before the write: keep a copy.
  const Tensor original = rec && rec.node().needs_input_grad(1)
                              ? below_autograd([&] { return self.clone(); })
                              : Tensor();
  below_autograd([&] { return mul_(self, other); });
  if (rec) {
    const size_t so = rec.save(other);
    const size_t sx = original.defined() ? rec.save(original) : 0;
    rec.record_inplace(self, [so, sx](FormulaNode& n, Grads g) -> variable_list {
      return {n.needs_input_grad(0) ? g[0] * n.saved(so) : Tensor(),
              n.needs_input_grad(1) ? g[0] * n.saved(sx) : Tensor()};
    });
  }
  return self;
}

Tensor& div_inplace_autograd(Tensor& self, const Tensor& other) {
  check_inplace(self, "div_");
  Recorder rec("DivBackward0", {&self, &other});
  const Tensor original = rec && rec.node().needs_input_grad(1)
                              ? below_autograd([&] { return self.clone(); })
                              : Tensor();
  below_autograd([&] { return div_(self, other); });
  if (rec) {
    const size_t so = rec.save(other);
    const size_t sx = original.defined() ? rec.save(original) : 0;
    rec.record_inplace(self, [so, sx](FormulaNode& n, Grads g) -> variable_list {
      const Tensor b = n.saved(so);
      return {n.needs_input_grad(0) ? g[0] / b : Tensor(),
              n.needs_input_grad(1) ? -g[0] * n.saved(sx) / (b * b) : Tensor()};
    });
  }
  return self;
}

Tensor& add_scalar_inplace_autograd(Tensor& self, const Scalar& other, const Scalar& alpha) {
  check_inplace(self, "add_");
  Recorder rec("AddBackward1", {&self});
  below_autograd([&] { return add_(self, other, alpha); });
  if (rec) rec.record_inplace(self, [](FormulaNode&, Grads g) -> variable_list { return {g[0]}; });
  return self;
}

Tensor& sub_scalar_inplace_autograd(Tensor& self, const Scalar& other, const Scalar& alpha) {
  check_inplace(self, "sub_");
  Recorder rec("SubBackward1", {&self});
  below_autograd([&] { return sub_(self, other, alpha); });
  if (rec) rec.record_inplace(self, [](FormulaNode&, Grads g) -> variable_list { return {g[0]}; });
  return self;
}

Tensor& mul_scalar_inplace_autograd(Tensor& self, const Scalar& other) {
  check_inplace(self, "mul_");
  Recorder rec("MulBackward1", {&self});
  below_autograd([&] { return mul_(self, other); });
  if (rec) {
    rec.record_inplace(self,
                       [other](FormulaNode&, Grads g) -> variable_list { return {g[0] * other}; });
  }
  return self;
}

Tensor& div_scalar_inplace_autograd(Tensor& self, const Scalar& other) {
  check_inplace(self, "div_");
  Recorder rec("DivBackward1", {&self});
  below_autograd([&] { return div_(self, other); });
  if (rec) {
    rec.record_inplace(self,
                       [other](FormulaNode&, Grads g) -> variable_list { return {g[0] / other}; });
  }
  return self;
}

Tensor& neg_inplace_autograd(Tensor& self) {
  check_inplace(self, "neg_");
  Recorder rec("NegBackward0", {&self});
  below_autograd([&] { return neg_(self); });
  if (rec) rec.record_inplace(self, [](FormulaNode&, Grads g) -> variable_list { return {-g[0]}; });
  return self;
}

Tensor& relu_inplace_autograd(Tensor& self) {
  check_inplace(self, "relu_");
  Recorder rec("ReluBackward0", {&self});
  below_autograd([&] { return relu_(self); });
  if (rec) {
    rec.record_inplace(self, nullptr);
    const size_t sy = rec.save_output(self);
    rec.node().set_formula([sy](FormulaNode& n, Grads g) -> variable_list {
      return {threshold_backward(g[0], n.saved(sy), 0)};
    });
  }
  return self;
}

// A unary op in place whose formula needs self's old values (`x`, kept in a copy) or the result
// (`y`: self after the write, saved as this node's output).
template <typename Forward, typename Formula>
Tensor& unary_inplace_autograd(const char* name, const char* op, Tensor& self, bool save_input,
                               bool save_result, Forward forward, Formula formula) {
  check_inplace(self, op);
  Recorder rec(name, {&self});
  const Tensor original =
      rec && save_input ? below_autograd([&] { return self.clone(); }) : Tensor();
  below_autograd([&] { forward(self); });
  if (rec) {
    const size_t sx = save_input ? rec.save(original) : 0;
    rec.record_inplace(self, nullptr);
    const size_t sy = save_result ? rec.save_output(self) : 0;
    set_unary_formula(rec, save_input ? &sx : nullptr, save_result ? &sy : nullptr, formula);
  }
  return self;
}

Tensor& exp_inplace_autograd(Tensor& self) {
  return unary_inplace_autograd(
      "ExpBackward0", "exp_", self, false, true, [](Tensor& x) { exp_(x); },
      [](const Tensor& g, const Tensor&, const Tensor& y) { return g * y; });
}
Tensor& log_inplace_autograd(Tensor& self) {
  return unary_inplace_autograd(
      "LogBackward0", "log_", self, true, false, [](Tensor& x) { log_(x); },
      [](const Tensor& g, const Tensor& x, const Tensor&) { return g / x; });
}
Tensor& sqrt_inplace_autograd(Tensor& self) {
  return unary_inplace_autograd(
      "SqrtBackward0", "sqrt_", self, false, true, [](Tensor& x) { sqrt_(x); },
      [](const Tensor& g, const Tensor&, const Tensor& y) { return g / (y * 2); });
}
Tensor& rsqrt_inplace_autograd(Tensor& self) {
  return unary_inplace_autograd(
      "RsqrtBackward0", "rsqrt_", self, false, true, [](Tensor& x) { rsqrt_(x); },
      [](const Tensor& g, const Tensor&, const Tensor& y) { return g * (y * y * y) * -0.5; });
}
Tensor& tanh_inplace_autograd(Tensor& self) {
  return unary_inplace_autograd(
      "TanhBackward0", "tanh_", self, false, true, [](Tensor& x) { tanh_(x); },
      [](const Tensor& g, const Tensor&, const Tensor& y) { return tanh_backward(g, y); });
}
Tensor& sigmoid_inplace_autograd(Tensor& self) {
  return unary_inplace_autograd(
      "SigmoidBackward0", "sigmoid_", self, false, true, [](Tensor& x) { sigmoid_(x); },
      [](const Tensor& g, const Tensor&, const Tensor& y) { return sigmoid_backward(g, y); });
}
Tensor& pow_inplace_autograd(Tensor& self, const Scalar& exponent) {
  const double e = exponent.to<double>();
  return unary_inplace_autograd(
      "PowBackward0", "pow_", self, true, false, [&](Tensor& x) { pow_(x, exponent); },
      [e](const Tensor& g, const Tensor& x, const Tensor&) {
        if (e == 0.0) return zeros_like(g);
        if (e == 1.0) return g;
        return g * pow(x, e - 1.0) * e;
      });
}

// ---- the backward helpers, for gradients of gradients ------------------------------------------

Tensor threshold_backward_autograd(const Tensor& grad, const Tensor& result,
                                   const Scalar& threshold) {
  Recorder rec("ThresholdBackwardBackward0", {&grad, &result});
  Tensor out = below_autograd([&] { return threshold_backward(grad, result, threshold); });
  if (rec) {
    const size_t sr = rec.save(result);
    rec.record(out, [sr, threshold](FormulaNode& n, Grads g) -> variable_list {
      return {threshold_backward(g[0], n.saved(sr), threshold), Tensor()};
    });
  }
  return out;
}

Tensor sigmoid_backward_autograd(const Tensor& grad, const Tensor& y) {
  // out = grad * y * (1 - y)
  Recorder rec("SigmoidBackwardBackward0", {&grad, &y});
  Tensor out = below_autograd([&] { return sigmoid_backward(grad, y); });
  if (rec) {
    const size_t sg = rec.save(grad), sy = rec.save(y);
    rec.record(out, [sg, sy](FormulaNode& n, Grads g) -> variable_list {
      const Tensor yy = n.saved(sy);
      return {n.needs_input_grad(0) ? sigmoid_backward(g[0], yy) : Tensor(),
              n.needs_input_grad(1) ? g[0] * n.saved(sg) * (1 - yy * 2) : Tensor()};
    });
  }
  return out;
}

Tensor tanh_backward_autograd(const Tensor& grad, const Tensor& y) {
  // out = grad * (1 - y^2)
  Recorder rec("TanhBackwardBackward0", {&grad, &y});
  Tensor out = below_autograd([&] { return tanh_backward(grad, y); });
  if (rec) {
    const size_t sg = rec.save(grad), sy = rec.save(y);
    rec.record(out, [sg, sy](FormulaNode& n, Grads g) -> variable_list {
      const Tensor yy = n.saved(sy);
      return {n.needs_input_grad(0) ? tanh_backward(g[0], yy) : Tensor(),
              n.needs_input_grad(1) ? g[0] * n.saved(sg) * yy * -2.0 : Tensor()};
    });
  }
  return out;
}

}  // namespace

FERRY_LIBRARY(ferry, m) {
  impl_autograd(m, "add.Tensor", &add_autograd, "AddBackward0");
  impl_autograd(m, "sub.Tensor", &sub_autograd, "SubBackward0");
  impl_autograd(m, "mul.Tensor", &mul_autograd, "MulBackward0");
  impl_autograd(m, "div.Tensor", &div_autograd, "DivBackward0");
  impl_autograd(m, "add.Scalar", &add_scalar_autograd, "AddBackward1");
  impl_autograd(m, "sub.Scalar", &sub_scalar_autograd, "SubBackward1");
  impl_autograd(m, "rsub.Scalar", &rsub_autograd, "RsubBackward1");
  impl_autograd(m, "mul.Scalar", &mul_scalar_autograd, "MulBackward1");
  impl_autograd(m, "div.Scalar", &div_scalar_autograd, "DivBackward1");
  impl_autograd(m, "rdiv.Scalar", &rdiv_autograd, "RdivBackward0");
  impl_autograd(m, "neg", &neg_autograd, "NegBackward0");
  impl_autograd(m, "exp", &exp_autograd, "ExpBackward0");
  impl_autograd(m, "log", &log_autograd, "LogBackward0");
  impl_autograd(m, "sqrt", &sqrt_autograd, "SqrtBackward0");
  impl_autograd(m, "rsqrt", &rsqrt_autograd, "RsqrtBackward0");
  impl_autograd(m, "tanh", &tanh_autograd, "TanhBackward0");
  impl_autograd(m, "sigmoid", &sigmoid_autograd, "SigmoidBackward0");
  impl_autograd(m, "relu", &relu_autograd, "ReluBackward0");
  impl_autograd(m, "abs", &abs_autograd, "AbsBackward0");
  impl_autograd(m, "sign", &sign_autograd, "SignBackward0");
  impl_autograd(m, "gelu", &gelu_autograd, "GeluBackward0");
  impl_autograd(m, "pow.Tensor_Scalar", &pow_autograd, "PowBackward0");
  impl_autograd(m, "where.self", &where_autograd, "WhereBackward0");
  impl_autograd(m, "add_.Tensor", &add_inplace_autograd, "AddBackward0");
  impl_autograd(m, "sub_.Tensor", &sub_inplace_autograd, "SubBackward0");
  impl_autograd(m, "mul_.Tensor", &mul_inplace_autograd, "MulBackward0");
  impl_autograd(m, "div_.Tensor", &div_inplace_autograd, "DivBackward0");
  impl_autograd(m, "add_.Scalar", &add_scalar_inplace_autograd, "AddBackward1");
  impl_autograd(m, "sub_.Scalar", &sub_scalar_inplace_autograd, "SubBackward1");
  impl_autograd(m, "mul_.Scalar", &mul_scalar_inplace_autograd, "MulBackward1");
  impl_autograd(m, "div_.Scalar", &div_scalar_inplace_autograd, "DivBackward1");
  impl_autograd(m, "neg_", &neg_inplace_autograd, "NegBackward0");
  impl_autograd(m, "relu_", &relu_inplace_autograd, "ReluBackward0");
  impl_autograd(m, "exp_", &exp_inplace_autograd, "ExpBackward0");
  impl_autograd(m, "log_", &log_inplace_autograd, "LogBackward0");
  impl_autograd(m, "sqrt_", &sqrt_inplace_autograd, "SqrtBackward0");
  impl_autograd(m, "rsqrt_", &rsqrt_inplace_autograd, "RsqrtBackward0");
  impl_autograd(m, "tanh_", &tanh_inplace_autograd, "TanhBackward0");
  impl_autograd(m, "sigmoid_", &sigmoid_inplace_autograd, "SigmoidBackward0");
  impl_autograd(m, "pow_.Scalar", &pow_inplace_autograd, "PowBackward0");
  impl_autograd(m, "threshold_backward", &threshold_backward_autograd,
                "ThresholdBackwardBackward0");
  impl_autograd(m, "sigmoid_backward", &sigmoid_backward_autograd, "SigmoidBackwardBackward0");
  impl_autograd(m, "tanh_backward", &tanh_backward_autograd, "TanhBackwardBackward0");
  for (const char* op :
       {"eq.Tensor", "eq.Scalar", "ne.Tensor", "ne.Scalar", "lt.Tensor", "lt.Scalar", "le.Tensor",
        "le.Scalar", "gt.Tensor", "gt.Scalar", "ge.Tensor", "ge.Scalar"}) {
    register_non_differentiable(m, op);
  }
}

}  // namespace ferry::autograd
