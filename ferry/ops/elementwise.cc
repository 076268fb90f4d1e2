// The elementwise operators: type promotion, device checks and the iterator, then
// elementwise_stub for the operands' device. In-place forms write through self (and bump its
// version); a result dtype self cannot hold is refused, as PyTorch does.
#include <string>

#include "ferry/iter/elementwise_stub.h"
#include "ferry/ops/math.h"
#include "ferry/ops/op_registration.h"
#include "ferry/ops/type_promotion.h"

namespace ferry {
namespace {

using K = ElementwiseKind;

void check_real(ScalarType t, const char* op) {
  FERRY_CHECK_AS(DTypeError, !is_complex(t) && t != kFloat8_e4m3fn && t != kFloat8_e5m2, op,
                 ": expected a real dtype other than float8, but got ", t);
}

// PyTorch's can_cast for in-place results: no float into integer, nothing non-bool into bool.
void check_can_cast(ScalarType from, ScalarType to, const char* op) {
  const bool ok = !(is_floating_point(from) && is_integral(to, /*include_bool=*/true)) &&
                  !(from != kBool && to == kBool);
  FERRY_CHECK_AS(DTypeError, ok, op, "_: result type ", dtype_name(from),
                 " can't be cast to the desired output type ", dtype_name(to));
}

// PyTorch's alpha rules for add/sub: a bool alpha only for a bool result, and a non-floating
// result takes no floating alpha.
void check_alpha(ScalarType result, const Scalar& alpha, const char* op) {
  FERRY_CHECK_AS(DTypeError, !alpha.is_bool() || result == kBool, op,
                 ": Boolean alpha only supported for Boolean results; got a ", result, " result");
  FERRY_CHECK_AS(
      DTypeError,
      is_floating_point(result) || is_complex(result) || alpha.is_bool() || alpha.is_integral(), op,
      ": For integral input tensors, argument alpha must not be a floating point "
      "number; got alpha ",
      alpha);
}

// PyTorch refuses subtraction with bool operands (it would be xor or not, spelled oddly).
void check_sub(ScalarType a, ScalarType b) {
  FERRY_CHECK_AS(DTypeError, !(a == kBool && b == kBool),
                 "sub: Subtraction, the `-` operator, with two bool tensors is not supported. Use "
                 "the `^` or `logical_xor()` operator instead.");
  FERRY_CHECK_AS(DTypeError, a != kBool && b != kBool,
                 "sub: Subtraction, the `-` operator, with a bool tensor is not supported. If you "
                 "are trying to invert a mask, use the `~` or `logical_not()` operator instead.");
}
// A Python-style number's dtype as PyTorch wraps it for the check above.
ScalarType wrapped_type(const Scalar& s) {
  return s.is_bool() ? kBool : s.is_integral() ? kInt64 : kFloat64;
}

bool is_cpu_number(const Tensor& t) { return t.dim() == 0 && t.is_cpu(); }

// Builds the iterator (output `out`, undefined to allocate; inputs converted to `compute`) and
// runs the kernel. Returns the output.
Tensor run(const ElementwiseOp& op, const Tensor& out, std::initializer_list<Tensor> inputs,
           ScalarType compute, bool bool_output) {
  std::array<Tensor, 3> converted;
  size_t n = 0;
  for (const Tensor& in : inputs) {
    // Kernels read stored values: a lazily negated view (_neg_view) is materialized first.
    const Tensor plain = in.is_neg() ? in.resolve_neg() : in;
    const bool keep = plain.dtype() == compute || (op.kind == K::Where && n == 0);
    converted[n++] = keep ? plain : plain.to(compute);
  }
  TensorIteratorConfig config;
  config.add_output(out);
  for (size_t i = 0; i < n; ++i) config.add_input(converted[i]);
  // where's first input is its bool condition: the output takes the values' dtype.
  if (op.kind == K::Where) config.check_all_same_dtype(false).output_dtype(compute);
  if (bool_output) config.check_all_same_dtype(false).output_dtype(kBool);
  if (out.defined()) config.resize_outputs(false);
  TensorIterator iter = config.build();
  if (iter.numel() > 0) elementwise_stub(iter.common_device().type(), iter, op);
  return iter.output();
}

void check_devices(const Tensor& a, const Tensor& b, const char* op) {
  FERRY_CHECK_AS(DeviceError, a.device() == b.device(), op,
                 ": Expected all tensors to be on the same device, but found at least two "
                 "devices, ",
                 a.device(), " and ", b.device(), "!");
}

// ---- binary ----------------------------------------------------------------------------------

Tensor binary_scalar(K kind, const Tensor& a, const Scalar& s, const Scalar& alpha,
                     bool scalar_first, std::optional<ScalarType> common_override = {}) {
  const char* name = elementwise_kind_name(kind);
  ScalarType common = common_override.value_or(result_type(a, s));
  if (kind == K::Div) common = to_floating(common);
  check_real(common, name);
  ElementwiseOp op{kind, alpha, s, /*scalar_operand=*/true, scalar_first};
  return run(op, Tensor(), {a}, common, is_comparison(kind));
}

Tensor binary(K kind, const Tensor& a, const Tensor& b, const Scalar& alpha = 1) {
  const char* name = elementwise_kind_name(kind);
  if (a.device() != b.device()) {
    // A 0-d CPU tensor joins a device tensor as a number, with its tensor promotion category.
    if (is_cpu_number(b)) return binary_scalar(kind, a, b.item(), alpha, false, result_type(a, b));
    if (is_cpu_number(a)) return binary_scalar(kind, b, a.item(), alpha, true, result_type(a, b));
    check_devices(a, b, name);
  }
  ScalarType common = result_type(a, b);
  if (kind == K::Div) common = to_floating(common);
  check_real(common, name);
  ElementwiseOp op{kind, alpha, 0, false, false};
  return run(op, Tensor(), {a, b}, common, is_comparison(kind));
}

Tensor& binary_inplace(K kind, Tensor& self, const Tensor& other, const Scalar& alpha = 1) {
  const char* name = elementwise_kind_name(kind);
  ScalarType common = result_type(self, other);
  if (kind == K::Div) common = to_floating(common);
  check_can_cast(common, self.dtype(), name);
  if (common != self.dtype() || (other.device() != self.device() && !is_cpu_number(other))) {
    self.copy_(binary(kind, self, other, alpha));
    return self;
  }
  if (other.device() != self.device()) {
    ElementwiseOp op{kind, alpha, other.item(), true, false};
    run(op, self, {self}, common, false);
  } else {
    run(ElementwiseOp{kind, alpha, 0, false, false}, self, {self, other}, common, false);
  }
  self.impl()->bump_version();
  return self;
}

Tensor& binary_scalar_inplace(K kind, Tensor& self, const Scalar& s, const Scalar& alpha = 1) {
  const char* name = elementwise_kind_name(kind);
  ScalarType common = result_type(self, s);
  if (kind == K::Div) common = to_floating(common);
  check_can_cast(common, self.dtype(), name);
  if (common != self.dtype()) {
    self.copy_(binary_scalar(kind, self, s, alpha, false));
    return self;
  }
  run(ElementwiseOp{kind, alpha, s, true, false}, self, {self}, common, false);
  self.impl()->bump_version();
  return self;
}

// ---- unary -----------------------------------------------------------------------------------

// float_result: integer inputs compute in float32 (exp, log, ...); otherwise the dtype stays.
Tensor unary(K kind, const Tensor& a, bool float_result, const Scalar& scalar = 0) {
  const ScalarType compute = float_result ? to_floating(a.dtype()) : a.dtype();
  check_real(compute, elementwise_kind_name(kind));
  return run(ElementwiseOp{kind, 1, scalar, false, false}, Tensor(), {a}, compute, false);
}

Tensor& unary_inplace(K kind, Tensor& self, const Scalar& scalar = 0) {
  check_real(self.dtype(), elementwise_kind_name(kind));
  run(ElementwiseOp{kind, 1, scalar, false, false}, self, {self}, self.dtype(), false);
  self.impl()->bump_version();
  return self;
}

// An op whose result has dtype `result`, in place: self must hold it (PyTorch's cast rule: an
// integer tensor cannot take a floating result).
Tensor& unary_inplace_as(K kind, Tensor& self, ScalarType result, const char* op,
                         const Scalar& scalar = 0) {
  FERRY_CHECK_AS(DTypeError, result == self.dtype(), op, ": result type ", dtype_name(result),
                 " can't be cast to the desired output type ", dtype_name(self.dtype()));
  return unary_inplace(kind, self, scalar);
}

K gelu_kind(std::string_view approximate, const char* op) {
  FERRY_CHECK(approximate == "none" || approximate == "tanh", op,
              ": approximate: expected \"none\" or \"tanh\", but got \"", std::string(approximate),
              "\"");
  return approximate == "tanh" ? K::GeluTanh : K::Gelu;
}

// ---- kernels (registered at every backend key) ------------------------------------------------

Tensor add_kernel(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  check_alpha(result_type(a, b), alpha, "add");
  return binary(K::Add, a, b, alpha);
}
Tensor add_scalar_kernel(const Tensor& a, const Scalar& b, const Scalar& alpha) {
  check_alpha(result_type(a, b), alpha, "add");
  return binary_scalar(K::Add, a, b, alpha, false);
}
Tensor sub_kernel(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  check_sub(a.dtype(), b.dtype());
  check_alpha(result_type(a, b), alpha, "sub");
  return binary(K::Sub, a, b, alpha);
}
Tensor sub_scalar_kernel(const Tensor& a, const Scalar& b, const Scalar& alpha) {
  check_sub(a.dtype(), wrapped_type(b));
  check_alpha(result_type(a, b), alpha, "sub");
  return binary_scalar(K::Sub, a, b, alpha, false);
}
Tensor rsub_kernel(const Tensor& a, const Scalar& b, const Scalar& alpha) {
  check_sub(wrapped_type(b), a.dtype());
  check_alpha(result_type(a, b), alpha, "rsub");
  // b - alpha * a
  if (alpha.to<double>() == 1.0) return binary_scalar(K::Sub, a, b, 1, true);
  return binary_scalar(K::Sub, binary_scalar(K::Mul, a, alpha, 1, false), b, 1, true);
}
Tensor mul_kernel(const Tensor& a, const Tensor& b) { return binary(K::Mul, a, b); }
Tensor mul_scalar_kernel(const Tensor& a, const Scalar& b) {
  return binary_scalar(K::Mul, a, b, 1, false);
}
Tensor div_kernel(const Tensor& a, const Tensor& b) { return binary(K::Div, a, b); }
Tensor div_scalar_kernel(const Tensor& a, const Scalar& b) {
  return binary_scalar(K::Div, a, b, 1, false);
}
Tensor rdiv_kernel(const Tensor& a, const Scalar& b) {
  return binary_scalar(K::Div, a, b, 1, true);
}

Tensor& add_inplace_kernel(Tensor& self, const Tensor& other, const Scalar& alpha) {
  check_alpha(result_type(self, other), alpha, "add_");
  return binary_inplace(K::Add, self, other, alpha);
}
Tensor& add_scalar_inplace_kernel(Tensor& self, const Scalar& other, const Scalar& alpha) {
  check_alpha(result_type(self, other), alpha, "add_");
  return binary_scalar_inplace(K::Add, self, other, alpha);
}
Tensor& sub_inplace_kernel(Tensor& self, const Tensor& other, const Scalar& alpha) {
  check_sub(self.dtype(), other.dtype());
  check_alpha(result_type(self, other), alpha, "sub_");
  return binary_inplace(K::Sub, self, other, alpha);
}
Tensor& sub_scalar_inplace_kernel(Tensor& self, const Scalar& other, const Scalar& alpha) {
  check_sub(self.dtype(), wrapped_type(other));
  check_alpha(result_type(self, other), alpha, "sub_");
  return binary_scalar_inplace(K::Sub, self, other, alpha);
}
Tensor& mul_inplace_kernel(Tensor& self, const Tensor& other) {
  return binary_inplace(K::Mul, self, other);
}
Tensor& mul_scalar_inplace_kernel(Tensor& self, const Scalar& other) {
  return binary_scalar_inplace(K::Mul, self, other);
}
Tensor& div_inplace_kernel(Tensor& self, const Tensor& other) {
  return binary_inplace(K::Div, self, other);
}
Tensor& div_scalar_inplace_kernel(Tensor& self, const Scalar& other) {
  return binary_scalar_inplace(K::Div, self, other);
}
Tensor& neg_inplace_kernel(Tensor& self) { return unary_inplace(K::Neg, self); }
Tensor& relu_inplace_kernel(Tensor& self) { return unary_inplace(K::Relu, self); }
Tensor& exp_inplace_kernel(Tensor& self) {
  return unary_inplace_as(K::Exp, self, to_floating(self.dtype()), "exp_");
}
Tensor& log_inplace_kernel(Tensor& self) {
  return unary_inplace_as(K::Log, self, to_floating(self.dtype()), "log_");
}
Tensor& sqrt_inplace_kernel(Tensor& self) {
  return unary_inplace_as(K::Sqrt, self, to_floating(self.dtype()), "sqrt_");
}
Tensor& rsqrt_inplace_kernel(Tensor& self) {
  return unary_inplace_as(K::Rsqrt, self, to_floating(self.dtype()), "rsqrt_");
}
Tensor& tanh_inplace_kernel(Tensor& self) {
  return unary_inplace_as(K::Tanh, self, to_floating(self.dtype()), "tanh_");
}
Tensor& sigmoid_inplace_kernel(Tensor& self) {
  return unary_inplace_as(K::Sigmoid, self, to_floating(self.dtype()), "sigmoid_");
}
Tensor& pow_inplace_kernel(Tensor& self, const Scalar& exponent) {
  if (is_integral(self.dtype(), true) && exponent.is_integral()) {
    FERRY_CHECK(exponent.to<int64_t>() >= 0,
                "pow_: Integers to negative integer powers are not allowed.");
  }
  return unary_inplace_as(K::Pow, self, result_type(self, exponent), "pow_", exponent);
}

Tensor neg_kernel(const Tensor& a) { return unary(K::Neg, a, false); }
Tensor exp_kernel(const Tensor& a) { return unary(K::Exp, a, true); }
Tensor log_kernel(const Tensor& a) { return unary(K::Log, a, true); }
Tensor sqrt_kernel(const Tensor& a) { return unary(K::Sqrt, a, true); }
Tensor rsqrt_kernel(const Tensor& a) { return unary(K::Rsqrt, a, true); }
Tensor tanh_kernel(const Tensor& a) { return unary(K::Tanh, a, true); }
Tensor sigmoid_kernel(const Tensor& a) { return unary(K::Sigmoid, a, true); }
Tensor relu_kernel(const Tensor& a) { return unary(K::Relu, a, false); }
Tensor abs_kernel(const Tensor& a) { return unary(K::Abs, a, false); }
// sign of a bool tensor is the tensor itself (a copy), as in PyTorch.
Tensor sign_kernel(const Tensor& a) {
  return a.dtype() == kBool ? a.clone() : unary(K::Sign, a, false);
}
Tensor gelu_kernel(const Tensor& a, std::string_view approximate) {
  FERRY_CHECK_AS(DTypeError, is_floating_point(a.dtype()),
                 "gelu: expected a floating-point tensor (float32, float64, bfloat16 or float16), "
                 "but got ",
                 dtype_name(a.dtype()));
  return unary(gelu_kind(approximate, "gelu"), a, true);
}
Tensor pow_kernel(const Tensor& a, const Scalar& exponent) {
  // Integer tensors keep their dtype for an integral exponent, else promote as PyTorch does.
  const ScalarType t = result_type(a, exponent);
  if (is_integral(t, true)) {
    FERRY_CHECK(exponent.to<int64_t>() >= 0 || !exponent.is_integral(),
                "pow: Integers to negative integer powers are not allowed.");
  }
  const Tensor base = a.dtype() == t ? a : a.to(t);
  return unary(K::Pow, base, false, exponent);
}

#define FERRY_COMPARISON_KERNELS(name, kind)                                            \
  Tensor name##_kernel(const Tensor& a, const Tensor& b) { return binary(kind, a, b); } \
  Tensor name##_scalar_kernel(const Tensor& a, const Scalar& b) {                       \
    return binary_scalar(kind, a, b, 1, false);                                         \
  }
FERRY_COMPARISON_KERNELS(eq, K::Eq)
FERRY_COMPARISON_KERNELS(ne, K::Ne)
FERRY_COMPARISON_KERNELS(lt, K::Lt)
FERRY_COMPARISON_KERNELS(le, K::Le)
FERRY_COMPARISON_KERNELS(gt, K::Gt)
FERRY_COMPARISON_KERNELS(ge, K::Ge)
#undef FERRY_COMPARISON_KERNELS

Tensor where_kernel(const Tensor& condition, const Tensor& a, const Tensor& b) {
  FERRY_CHECK_AS(DTypeError, condition.dtype() == kBool,
                 "where: expected a bool condition, but got ", condition.dtype());
  check_devices(condition, a, "where");
  check_devices(a, b, "where");
  const ScalarType common = result_type(a, b);
  check_real(common, "where");
  return run(ElementwiseOp{K::Where, 1, 0, false, false}, Tensor(), {condition, a, b}, common,
             false);
}

Tensor threshold_backward_kernel(const Tensor& grad, const Tensor& result,
                                 const Scalar& threshold) {
  FERRY_CHECK(threshold.to<double>() == 0.0,
              "threshold_backward: only threshold 0 (relu's) is supported, but got ", threshold);
  check_devices(grad, result, "threshold_backward");
  return run(ElementwiseOp{K::ReluBackward, 1, 0, false, false}, Tensor(), {grad, result},
             result_type(grad, result), false);
}
Tensor sigmoid_backward_kernel(const Tensor& grad, const Tensor& output) {
  check_devices(grad, output, "sigmoid_backward");
  return run(ElementwiseOp{K::SigmoidBackward, 1, 0, false, false}, Tensor(), {grad, output},
             result_type(grad, output), false);
}
Tensor tanh_backward_kernel(const Tensor& grad, const Tensor& output) {
  check_devices(grad, output, "tanh_backward");
  return run(ElementwiseOp{K::TanhBackward, 1, 0, false, false}, Tensor(), {grad, output},
             result_type(grad, output), false);
}
Tensor gelu_backward_kernel(const Tensor& grad, const Tensor& self, std::string_view approximate) {
  check_devices(grad, self, "gelu_backward");
  const K kind = gelu_kind(approximate, "gelu_backward") == K::GeluTanh ? K::GeluTanhBackward
                                                                        : K::GeluBackward;
  return run(ElementwiseOp{kind, 1, 0, false, false}, Tensor(), {grad, self},
             result_type(grad, self), false);
}

}  // namespace

FERRY_LIBRARY(ferry, m) {
  m.def("add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor");
  m.def("add.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor");
  m.def("sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor");
  m.def("sub.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor");
  m.def("rsub.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor");
  m.def("mul.Tensor(Tensor self, Tensor other) -> Tensor");
  m.def("mul.Scalar(Tensor self, Scalar other) -> Tensor");
  m.def("div.Tensor(Tensor self, Tensor other) -> Tensor");
  m.def("div.Scalar(Tensor self, Scalar other) -> Tensor");
  m.def("rdiv.Scalar(Tensor self, Scalar other) -> Tensor");
  m.def("add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)");
  m.def("add_.Scalar(Tensor(a!) self, Scalar other, Scalar alpha=1) -> Tensor(a!)");
  m.def("sub_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)");
  m.def("sub_.Scalar(Tensor(a!) self, Scalar other, Scalar alpha=1) -> Tensor(a!)");
  m.def("mul_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)");
  m.def("mul_.Scalar(Tensor(a!) self, Scalar other) -> Tensor(a!)");
  m.def("div_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)");
  m.def("div_.Scalar(Tensor(a!) self, Scalar other) -> Tensor(a!)");
  m.def("neg_(Tensor(a!) self) -> Tensor(a!)");
  m.def("relu_(Tensor(a!) self) -> Tensor(a!)");
  for (const char* name : {"exp_", "log_", "sqrt_", "rsqrt_", "tanh_", "sigmoid_"}) {
    m.def(std::string(name) + "(Tensor(a!) self) -> Tensor(a!)");
  }
  m.def("pow_.Scalar(Tensor(a!) self, Scalar exponent) -> Tensor(a!)");
  for (const char* name :
       {"neg", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "abs", "sign"}) {
    m.def(std::string(name) + "(Tensor self) -> Tensor");
  }
  m.def("gelu(Tensor self, *, str approximate='none') -> Tensor");
  m.def("pow.Tensor_Scalar(Tensor self, Scalar exponent) -> Tensor");
  for (const char* name : {"eq", "ne", "lt", "le", "gt", "ge"}) {
    m.def(std::string(name) + ".Tensor(Tensor self, Tensor other) -> Tensor");
    m.def(std::string(name) + ".Scalar(Tensor self, Scalar other) -> Tensor");
  }
  m.def("where.self(Tensor condition, Tensor self, Tensor other) -> Tensor");
  m.def("threshold_backward(Tensor grad_output, Tensor self, Scalar threshold) -> Tensor");
  m.def("sigmoid_backward(Tensor grad_output, Tensor output) -> Tensor");
  m.def("tanh_backward(Tensor grad_output, Tensor output) -> Tensor");
  m.def("gelu_backward(Tensor grad_output, Tensor self, *, str approximate='none') -> Tensor");

  impl_backends(m, "add.Tensor", &add_kernel, "add");
  impl_backends(m, "add.Scalar", &add_scalar_kernel, "add");
  impl_backends(m, "sub.Tensor", &sub_kernel, "sub");
  impl_backends(m, "sub.Scalar", &sub_scalar_kernel, "sub");
  impl_backends(m, "rsub.Scalar", &rsub_kernel, "rsub");
  impl_backends(m, "mul.Tensor", &mul_kernel, "mul");
  impl_backends(m, "mul.Scalar", &mul_scalar_kernel, "mul");
  impl_backends(m, "div.Tensor", &div_kernel, "div");
  impl_backends(m, "div.Scalar", &div_scalar_kernel, "div");
  impl_backends(m, "rdiv.Scalar", &rdiv_kernel, "rdiv");
  impl_backends(m, "add_.Tensor", &add_inplace_kernel, "add_");
  impl_backends(m, "add_.Scalar", &add_scalar_inplace_kernel, "add_");
  impl_backends(m, "sub_.Tensor", &sub_inplace_kernel, "sub_");
  impl_backends(m, "sub_.Scalar", &sub_scalar_inplace_kernel, "sub_");
  impl_backends(m, "mul_.Tensor", &mul_inplace_kernel, "mul_");
  impl_backends(m, "mul_.Scalar", &mul_scalar_inplace_kernel, "mul_");
  impl_backends(m, "div_.Tensor", &div_inplace_kernel, "div_");
  impl_backends(m, "div_.Scalar", &div_scalar_inplace_kernel, "div_");
  impl_backends(m, "neg_", &neg_inplace_kernel, "neg_");
  impl_backends(m, "relu_", &relu_inplace_kernel, "relu_");
  impl_backends(m, "exp_", &exp_inplace_kernel, "exp_");
  impl_backends(m, "log_", &log_inplace_kernel, "log_");
  impl_backends(m, "sqrt_", &sqrt_inplace_kernel, "sqrt_");
  impl_backends(m, "rsqrt_", &rsqrt_inplace_kernel, "rsqrt_");
  impl_backends(m, "tanh_", &tanh_inplace_kernel, "tanh_");
  impl_backends(m, "sigmoid_", &sigmoid_inplace_kernel, "sigmoid_");
  impl_backends(m, "pow_.Scalar", &pow_inplace_kernel, "pow_");
  impl_backends(m, "neg", &neg_kernel, "neg");
  impl_backends(m, "exp", &exp_kernel, "exp");
  impl_backends(m, "log", &log_kernel, "log");
  impl_backends(m, "sqrt", &sqrt_kernel, "sqrt");
  impl_backends(m, "rsqrt", &rsqrt_kernel, "rsqrt");
  impl_backends(m, "tanh", &tanh_kernel, "tanh");
  impl_backends(m, "sigmoid", &sigmoid_kernel, "sigmoid");
  impl_backends(m, "relu", &relu_kernel, "relu");
  impl_backends(m, "abs", &abs_kernel, "abs");
  impl_backends(m, "sign", &sign_kernel, "sign");
  impl_backends(m, "gelu", &gelu_kernel, "gelu");
  impl_backends(m, "pow.Tensor_Scalar", &pow_kernel, "pow");
  impl_backends(m, "eq.Tensor", &eq_kernel, "eq");
  impl_backends(m, "eq.Scalar", &eq_scalar_kernel, "eq");
  impl_backends(m, "ne.Tensor", &ne_kernel, "ne");
  impl_backends(m, "ne.Scalar", &ne_scalar_kernel, "ne");
  impl_backends(m, "lt.Tensor", &lt_kernel, "lt");
  impl_backends(m, "lt.Scalar", &lt_scalar_kernel, "lt");
  impl_backends(m, "le.Tensor", &le_kernel, "le");
  impl_backends(m, "le.Scalar", &le_scalar_kernel, "le");
  impl_backends(m, "gt.Tensor", &gt_kernel, "gt");
  impl_backends(m, "gt.Scalar", &gt_scalar_kernel, "gt");
  impl_backends(m, "ge.Tensor", &ge_kernel, "ge");
  impl_backends(m, "ge.Scalar", &ge_scalar_kernel, "ge");
  impl_backends(m, "where.self", &where_kernel, "where");
  impl_backends(m, "threshold_backward", &threshold_backward_kernel, "threshold_backward");
  impl_backends(m, "sigmoid_backward", &sigmoid_backward_kernel, "sigmoid_backward");
  impl_backends(m, "tanh_backward", &tanh_backward_kernel, "tanh_backward");
  impl_backends(m, "gelu_backward", &gelu_backward_kernel, "gelu_backward");
}

// ---- the typed front-ends ---------------------------------------------------------------------

using TT = Tensor(const Tensor&, const Tensor&);
using TS = Tensor(const Tensor&, const Scalar&);
using TTA = Tensor(const Tensor&, const Tensor&, const Scalar&);
using TSA = Tensor(const Tensor&, const Scalar&, const Scalar&);
using IT = Tensor&(Tensor&, const Tensor&);
using IS = Tensor&(Tensor&, const Scalar&);
using ITA = Tensor&(Tensor&, const Tensor&, const Scalar&);
using ISA = Tensor&(Tensor&, const Scalar&, const Scalar&);
using U = Tensor(const Tensor&);

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  return FERRY_OP("ferry::add.Tensor", TTA).call(a, b, alpha);
}
Tensor add(const Tensor& a, const Scalar& b, const Scalar& alpha) {
  return FERRY_OP("ferry::add.Scalar", TSA).call(a, b, alpha);
}
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  return FERRY_OP("ferry::sub.Tensor", TTA).call(a, b, alpha);
}
Tensor sub(const Tensor& a, const Scalar& b, const Scalar& alpha) {
  return FERRY_OP("ferry::sub.Scalar", TSA).call(a, b, alpha);
}
Tensor rsub(const Tensor& a, const Scalar& b, const Scalar& alpha) {
  return FERRY_OP("ferry::rsub.Scalar", TSA).call(a, b, alpha);
}
Tensor mul(const Tensor& a, const Tensor& b) {
  return FERRY_OP("ferry::mul.Tensor", TT).call(a, b);
}
Tensor mul(const Tensor& a, const Scalar& b) {
  return FERRY_OP("ferry::mul.Scalar", TS).call(a, b);
}
Tensor div(const Tensor& a, const Tensor& b) {
  return FERRY_OP("ferry::div.Tensor", TT).call(a, b);
}
Tensor div(const Tensor& a, const Scalar& b) {
  return FERRY_OP("ferry::div.Scalar", TS).call(a, b);
}
Tensor rdiv(const Tensor& a, const Scalar& b) {
  return FERRY_OP("ferry::rdiv.Scalar", TS).call(a, b);
}
Tensor neg(const Tensor& a) { return FERRY_OP("ferry::neg", U).call(a); }
Tensor exp(const Tensor& a) { return FERRY_OP("ferry::exp", U).call(a); }
Tensor log(const Tensor& a) { return FERRY_OP("ferry::log", U).call(a); }
Tensor sqrt(const Tensor& a) { return FERRY_OP("ferry::sqrt", U).call(a); }
Tensor rsqrt(const Tensor& a) { return FERRY_OP("ferry::rsqrt", U).call(a); }
Tensor tanh(const Tensor& a) { return FERRY_OP("ferry::tanh", U).call(a); }
Tensor sigmoid(const Tensor& a) { return FERRY_OP("ferry::sigmoid", U).call(a); }
Tensor relu(const Tensor& a) { return FERRY_OP("ferry::relu", U).call(a); }
Tensor abs(const Tensor& a) { return FERRY_OP("ferry::abs", U).call(a); }
Tensor sign(const Tensor& a) { return FERRY_OP("ferry::sign", U).call(a); }
Tensor gelu(const Tensor& a, std::string_view approximate) {
  return FERRY_OP("ferry::gelu", Tensor(const Tensor&, std::string_view)).call(a, approximate);
}
Tensor pow(const Tensor& a, const Scalar& exponent) {
  return FERRY_OP("ferry::pow.Tensor_Scalar", TS).call(a, exponent);
}
#define FERRY_COMPARISON_FRONTENDS(name)                                               \
  Tensor name(const Tensor& a, const Tensor& b) {                                      \
    return FERRY_OP("ferry::" #name ".Tensor", TT).call(a, b);                         \
  }                                                                                    \
  Tensor name(const Tensor& a, const Scalar& b) {                                      \
    return FERRY_OP("ferry::" #name ".Scalar", TS).call(a, b);                         \
  }                                                                                    \
  Tensor Tensor::name(const Tensor& other) const { return ferry::name(*this, other); } \
  Tensor Tensor::name(const Scalar& other) const { return ferry::name(*this, other); }
FERRY_COMPARISON_FRONTENDS(eq)
FERRY_COMPARISON_FRONTENDS(ne)
FERRY_COMPARISON_FRONTENDS(lt)
FERRY_COMPARISON_FRONTENDS(le)
FERRY_COMPARISON_FRONTENDS(gt)
FERRY_COMPARISON_FRONTENDS(ge)
#undef FERRY_COMPARISON_FRONTENDS
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b) {
  return FERRY_OP("ferry::where.self", Tensor(const Tensor&, const Tensor&, const Tensor&))
      .call(condition, a, b);
}

Tensor& add_(Tensor& self, const Tensor& other, const Scalar& alpha) {
  return FERRY_OP("ferry::add_.Tensor", ITA).call(self, other, alpha);
}
Tensor& add_(Tensor& self, const Scalar& other, const Scalar& alpha) {
  return FERRY_OP("ferry::add_.Scalar", ISA).call(self, other, alpha);
}
Tensor& sub_(Tensor& self, const Tensor& other, const Scalar& alpha) {
  return FERRY_OP("ferry::sub_.Tensor", ITA).call(self, other, alpha);
}
Tensor& sub_(Tensor& self, const Scalar& other, const Scalar& alpha) {
  return FERRY_OP("ferry::sub_.Scalar", ISA).call(self, other, alpha);
}
Tensor& mul_(Tensor& self, const Tensor& other) {
  return FERRY_OP("ferry::mul_.Tensor", IT).call(self, other);
}
Tensor& mul_(Tensor& self, const Scalar& other) {
  return FERRY_OP("ferry::mul_.Scalar", IS).call(self, other);
}
Tensor& div_(Tensor& self, const Tensor& other) {
  return FERRY_OP("ferry::div_.Tensor", IT).call(self, other);
}
Tensor& div_(Tensor& self, const Scalar& other) {
  return FERRY_OP("ferry::div_.Scalar", IS).call(self, other);
}
Tensor& neg_(Tensor& self) { return FERRY_OP("ferry::neg_", Tensor & (Tensor&)).call(self); }
Tensor& relu_(Tensor& self) { return FERRY_OP("ferry::relu_", Tensor & (Tensor&)).call(self); }
Tensor& exp_(Tensor& self) { return FERRY_OP("ferry::exp_", Tensor & (Tensor&)).call(self); }
Tensor& log_(Tensor& self) { return FERRY_OP("ferry::log_", Tensor & (Tensor&)).call(self); }
Tensor& sqrt_(Tensor& self) { return FERRY_OP("ferry::sqrt_", Tensor & (Tensor&)).call(self); }
Tensor& rsqrt_(Tensor& self) { return FERRY_OP("ferry::rsqrt_", Tensor & (Tensor&)).call(self); }
Tensor& tanh_(Tensor& self) { return FERRY_OP("ferry::tanh_", Tensor & (Tensor&)).call(self); }
Tensor& sigmoid_(Tensor& self) {
  return FERRY_OP("ferry::sigmoid_", Tensor & (Tensor&)).call(self);
}
Tensor& pow_(Tensor& self, const Scalar& exponent) {
  return FERRY_OP("ferry::pow_.Scalar", IS).call(self, exponent);
}

Tensor threshold_backward(const Tensor& grad, const Tensor& result, const Scalar& threshold) {
  return FERRY_OP("ferry::threshold_backward", TTA).call(grad, result, threshold);
}
Tensor sigmoid_backward(const Tensor& grad, const Tensor& output) {
  return FERRY_OP("ferry::sigmoid_backward", TT).call(grad, output);
}
Tensor tanh_backward(const Tensor& grad, const Tensor& output) {
  return FERRY_OP("ferry::tanh_backward", TT).call(grad, output);
}
Tensor gelu_backward(const Tensor& grad, const Tensor& self, std::string_view approximate) {
  return FERRY_OP("ferry::gelu_backward", Tensor(const Tensor&, const Tensor&, std::string_view))
      .call(grad, self, approximate);
}

// ---- Tensor methods and operators -------------------------------------------------------------

Tensor Tensor::add(const Tensor& o, const Scalar& alpha) const {
  return ferry::add(*this, o, alpha);
}
Tensor Tensor::add(const Scalar& o, const Scalar& alpha) const {
  return ferry::add(*this, o, alpha);
}
Tensor Tensor::sub(const Tensor& o, const Scalar& alpha) const {
  return ferry::sub(*this, o, alpha);
}
Tensor Tensor::sub(const Scalar& o, const Scalar& alpha) const {
  return ferry::sub(*this, o, alpha);
}
Tensor Tensor::mul(const Tensor& o) const { return ferry::mul(*this, o); }
Tensor Tensor::mul(const Scalar& o) const { return ferry::mul(*this, o); }
Tensor Tensor::div(const Tensor& o) const { return ferry::div(*this, o); }
Tensor Tensor::div(const Scalar& o) const { return ferry::div(*this, o); }
Tensor& Tensor::add_(const Tensor& o, const Scalar& alpha) { return ferry::add_(*this, o, alpha); }
Tensor& Tensor::add_(const Scalar& o, const Scalar& alpha) { return ferry::add_(*this, o, alpha); }
Tensor& Tensor::sub_(const Tensor& o, const Scalar& alpha) { return ferry::sub_(*this, o, alpha); }
Tensor& Tensor::sub_(const Scalar& o, const Scalar& alpha) { return ferry::sub_(*this, o, alpha); }
Tensor& Tensor::mul_(const Tensor& o) { return ferry::mul_(*this, o); }
Tensor& Tensor::mul_(const Scalar& o) { return ferry::mul_(*this, o); }
Tensor& Tensor::div_(const Tensor& o) { return ferry::div_(*this, o); }
Tensor& Tensor::div_(const Scalar& o) { return ferry::div_(*this, o); }
Tensor Tensor::neg() const { return ferry::neg(*this); }
Tensor& Tensor::neg_() { return ferry::neg_(*this); }
Tensor Tensor::exp() const { return ferry::exp(*this); }
Tensor Tensor::log() const { return ferry::log(*this); }
Tensor Tensor::sqrt() const { return ferry::sqrt(*this); }
Tensor Tensor::rsqrt() const { return ferry::rsqrt(*this); }
Tensor Tensor::tanh() const { return ferry::tanh(*this); }
Tensor Tensor::sigmoid() const { return ferry::sigmoid(*this); }
Tensor Tensor::relu() const { return ferry::relu(*this); }
Tensor& Tensor::relu_() { return ferry::relu_(*this); }
Tensor& Tensor::exp_() { return ferry::exp_(*this); }
Tensor& Tensor::log_() { return ferry::log_(*this); }
Tensor& Tensor::sqrt_() { return ferry::sqrt_(*this); }
Tensor& Tensor::rsqrt_() { return ferry::rsqrt_(*this); }
Tensor& Tensor::tanh_() { return ferry::tanh_(*this); }
Tensor& Tensor::sigmoid_() { return ferry::sigmoid_(*this); }
Tensor& Tensor::pow_(const Scalar& exponent) { return ferry::pow_(*this, exponent); }
Tensor Tensor::abs() const { return ferry::abs(*this); }
Tensor Tensor::gelu(std::string_view approximate) const { return ferry::gelu(*this, approximate); }
Tensor Tensor::pow(const Scalar& exponent) const { return ferry::pow(*this, exponent); }

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator+(const Tensor& a, const Scalar& b) { return add(a, b); }
Tensor operator+(const Scalar& a, const Tensor& b) { return add(b, a); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator-(const Tensor& a, const Scalar& b) { return sub(a, b); }
Tensor operator-(const Scalar& a, const Tensor& b) { return rsub(b, a); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator*(const Tensor& a, const Scalar& b) { return mul(a, b); }
Tensor operator*(const Scalar& a, const Tensor& b) { return mul(b, a); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator/(const Tensor& a, const Scalar& b) { return div(a, b); }
Tensor operator/(const Scalar& a, const Tensor& b) { return rdiv(b, a); }
Tensor operator-(const Tensor& a) { return neg(a); }
Tensor& operator+=(Tensor& a, const Tensor& b) { return add_(a, b); }
Tensor& operator+=(Tensor& a, const Scalar& b) { return add_(a, b); }
Tensor& operator-=(Tensor& a, const Tensor& b) { return sub_(a, b); }
Tensor& operator-=(Tensor& a, const Scalar& b) { return sub_(a, b); }
Tensor& operator*=(Tensor& a, const Tensor& b) { return mul_(a, b); }
Tensor& operator*=(Tensor& a, const Scalar& b) { return mul_(a, b); }
Tensor& operator/=(Tensor& a, const Tensor& b) { return div_(a, b); }
Tensor& operator/=(Tensor& a, const Scalar& b) { return div_(a, b); }

}  // namespace ferry
