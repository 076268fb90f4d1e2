// The CPU elementwise kernel (elementwise_stub for DeviceType::CPU; sim runs it too). Each
// operation is a scalar function in the compute type (float for float16, bfloat16 and float32,
// double for float64, the type itself for integers and bool) applied over the iterator's 2-d
// loops; contiguous and broadcast inner loops are written out so the compiler vectorizes them.
// Guarantees: results equal PyTorch's CPU kernels' up to float rounding of the transcendental
// functions; float16/bfloat16 round once, on the store; NaN propagates through relu as PyTorch's.
#include <cmath>
#include <numbers>
#include <type_traits>

#include "ferry/backends/cpu/math/wrapping.h"
#include "ferry/core/error.h"
#include "ferry/iter/copy_element.h"
#include "ferry/iter/elementwise_stub.h"

namespace ferry::cpu {
namespace {

template <typename T>
using compute_t =
    std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;

template <typename T>
constexpr bool is_float_v = std::is_floating_point_v<compute_t<T>>;

// out[i] = f(in[i]) over the iterator (operand 0 the output, operand 1 the input).
template <typename Out, typename In, typename F>
void unary_loop(const TensorIterator& iter, F f) {
  iter.for_each([&](char** data, const int64_t* strides, int64_t n0, int64_t n1) {
    for (int64_t j = 0; j < n1; ++j) {
      char* out = data[0] + j * strides[2];
      const char* in = data[1] + j * strides[3];
      if (strides[0] == sizeof(Out) && strides[1] == sizeof(In)) {
        auto* o = reinterpret_cast<Out*>(out);
        const auto* a = reinterpret_cast<const In*>(in);
        for (int64_t i = 0; i < n0; ++i) o[i] = static_cast<Out>(f(a[i]));
      } else {
        for (int64_t i = 0; i < n0; ++i) {
          *reinterpret_cast<Out*>(out + i * strides[0]) =
              static_cast<Out>(f(*reinterpret_cast<const In*>(in + i * strides[1])));
        }
      }
    }
  });
}

// One row of out[i] = f(a[i], b[i]) (byte strides); either input may be broadcast (stride 0).
// Not inlined: the tensor-tensor loop and both tensor-scalar loops share this one copy per
// (types, f), which keeps the kernel's compile time in check (the scalar forms once had loops of
// their own: 40% of this file's compile time).
template <typename Out, typename In, typename F>
[[gnu::noinline]] void binary_row(char* out, const char* pa, const char* pb, int64_t n0, int64_t so,
                                  int64_t sa, int64_t sb, const F& f) {
  auto* o = reinterpret_cast<Out*>(out);
  const auto* a = reinterpret_cast<const In*>(pa);
  const auto* b = reinterpret_cast<const In*>(pb);
  if (so == sizeof(Out) && sa == sizeof(In) && sb == sizeof(In)) {
    for (int64_t i = 0; i < n0; ++i) o[i] = static_cast<Out>(f(a[i], b[i]));
  } else if (so == sizeof(Out) && sa == sizeof(In) && sb == 0) {
    const In bv = *b;
    for (int64_t i = 0; i < n0; ++i) o[i] = static_cast<Out>(f(a[i], bv));
  } else if (so == sizeof(Out) && sa == 0 && sb == sizeof(In)) {
    const In av = *a;
    for (int64_t i = 0; i < n0; ++i) o[i] = static_cast<Out>(f(av, b[i]));
  } else {
    for (int64_t i = 0; i < n0; ++i) {
      *reinterpret_cast<Out*>(out + i * so) = static_cast<Out>(
          f(*reinterpret_cast<const In*>(pa + i * sa), *reinterpret_cast<const In*>(pb + i * sb)));
    }
  }
}

// out[i] = f(a[i], b[i]) over the iterator (operands: out, a, b).
template <typename Out, typename In, typename F>
void binary_loop(const TensorIterator& iter, F f) {
  iter.for_each([&](char** data, const int64_t* strides, int64_t n0, int64_t n1) {
    for (int64_t j = 0; j < n1; ++j) {
      binary_row<Out, In>(data[0] + j * strides[3], data[1] + j * strides[4],
                          data[2] + j * strides[5], n0, strides[0], strides[1], strides[2], f);
    }
  });
}

// out[i] = f(a[i], s) or f(s, a[i]) over the iterator (operands: out, a): the binary row with
// the scalar as a broadcast input. The scalar must be exact in In.
template <typename Out, typename In, typename F>
void binary_scalar_loop(const TensorIterator& iter, In s, bool scalar_first, F f) {
  const char* sp = reinterpret_cast<const char*>(&s);
  iter.for_each([&](char** data, const int64_t* strides, int64_t n0, int64_t n1) {
    for (int64_t j = 0; j < n1; ++j) {
      char* out = data[0] + j * strides[2];
      const char* a = data[1] + j * strides[3];
      if (scalar_first) {
        binary_row<Out, In>(out, sp, a, n0, strides[0], 0, strides[1], f);
      } else {
        binary_row<Out, In>(out, a, sp, n0, strides[0], strides[1], 0, f);
      }
    }
  });
}

template <typename T>
void where_loop(const TensorIterator& iter) {
  iter.for_each([&](char** data, const int64_t* strides, int64_t n0, int64_t n1) {
    for (int64_t j = 0; j < n1; ++j) {
      char* out = data[0] + j * strides[4];
      const char* c = data[1] + j * strides[5];
      const char* a = data[2] + j * strides[6];
      const char* b = data[3] + j * strides[7];
      for (int64_t i = 0; i < n0; ++i) {
        const bool take_a = *reinterpret_cast<const bool*>(c + i * strides[1]);
        *reinterpret_cast<T*>(out + i * strides[0]) =
            take_a ? *reinterpret_cast<const T*>(a + i * strides[2])
                   : *reinterpret_cast<const T*>(b + i * strides[3]);
      }
    }
  });
}

[[noreturn]] void unsupported(const ElementwiseOp& op, ScalarType t) {
  FERRY_FAIL_AS(DTypeError, "elementwise ", elementwise_kind_name(op.kind),
                ": expected a dtype the operation is defined for, but got ", t);
}

// Integer power by squaring; negative exponents of integers are refused by the front-end.
template <typename C>
C int_pow(C base, int64_t exp) {
  C result = 1;
  while (exp > 0) {
    if (exp & 1) result = static_cast<C>(wrapping_mul(result, base));
    base = static_cast<C>(wrapping_mul(base, base));
    exp >>= 1;
  }
  return result;
}

template <typename C>
C gelu(C x) {
  return static_cast<C>(0.5) * x * (C(1) + std::erf(x * static_cast<C>(std::numbers::sqrt2 / 2)));
}
template <typename C>
C gelu_tanh(C x) {
  const C beta = static_cast<C>(std::numbers::sqrt2 * std::numbers::inv_sqrtpi);  // sqrt(2/pi)
  const C kappa = static_cast<C>(0.044715);
  return static_cast<C>(0.5) * x * (C(1) + std::tanh(beta * (x + kappa * x * x * x)));
}
template <typename C>
C gelu_grad(C x) {
  const C cdf =
      static_cast<C>(0.5) * (C(1) + std::erf(x * static_cast<C>(std::numbers::sqrt2 / 2)));
  const C pdf = std::exp(static_cast<C>(-0.5) * x * x) *
                static_cast<C>(std::numbers::inv_sqrtpi / std::numbers::sqrt2);
  return cdf + x * pdf;
}
template <typename C>
C gelu_tanh_grad(C x) {
  const C beta = static_cast<C>(std::numbers::sqrt2 * std::numbers::inv_sqrtpi);
  const C kappa = static_cast<C>(0.044715);
  const C inner = beta * (x + kappa * x * x * x);
  const C t = std::tanh(inner);
  const C left = static_cast<C>(0.5) * x;
  const C right = C(1) + t;
  const C d_inner = beta * (C(1) + C(3) * kappa * x * x);
  return static_cast<C>(0.5) * right + left * (C(1) - t * t) * d_inner;
}

template <typename T>
void run_unary(const TensorIterator& iter, const ElementwiseOp& op) {
  using C = compute_t<T>;
  const auto c = [](auto v) { return static_cast<C>(v); };
  (void)c;
  if constexpr (is_float_v<T>) {
    switch (op.kind) {
      case ElementwiseKind::Neg:
        return unary_loop<T, T>(iter, [&](T x) { return -c(x); });
      case ElementwiseKind::Exp:
        return unary_loop<T, T>(iter, [&](T x) { return std::exp(c(x)); });
      case ElementwiseKind::Log:
        return unary_loop<T, T>(iter, [&](T x) { return std::log(c(x)); });
      case ElementwiseKind::Sqrt:
        return unary_loop<T, T>(iter, [&](T x) { return std::sqrt(c(x)); });
      case ElementwiseKind::Rsqrt:
        return unary_loop<T, T>(iter, [&](T x) { return C(1) / std::sqrt(c(x)); });
      case ElementwiseKind::Tanh:
        return unary_loop<T, T>(iter, [&](T x) { return std::tanh(c(x)); });
      case ElementwiseKind::Sigmoid:
        return unary_loop<T, T>(iter, [&](T x) { return C(1) / (C(1) + std::exp(-c(x))); });
      case ElementwiseKind::Relu:
        return unary_loop<T, T>(iter, [&](T x) { return c(x) < C(0) ? C(0) : c(x); });
      case ElementwiseKind::Gelu:
        return unary_loop<T, T>(iter, [&](T x) { return gelu(c(x)); });
      case ElementwiseKind::GeluTanh:
        return unary_loop<T, T>(iter, [&](T x) { return gelu_tanh(c(x)); });
      case ElementwiseKind::Abs:
        return unary_loop<T, T>(iter, [&](T x) { return std::abs(c(x)); });
      case ElementwiseKind::Sign:
        return unary_loop<T, T>(iter, [&](T x) {
          const C v = c(x);
          return v > C(0) ? C(1) : v < C(0) ? C(-1) : v;  // 0 and NaN stay
        });
      case ElementwiseKind::Pow: {
        const C e = op.scalar.to<C>();
        if (e == C(2)) return unary_loop<T, T>(iter, [&](T x) { return c(x) * c(x); });
        if (e == C(0.5)) return unary_loop<T, T>(iter, [&](T x) { return std::sqrt(c(x)); });
        return unary_loop<T, T>(iter, [&](T x) { return std::pow(c(x), e); });
      }
      default:
        break;
    }
  } else if constexpr (!std::is_same_v<T, bool>) {
    switch (op.kind) {
      case ElementwiseKind::Neg:
        return unary_loop<T, T>(iter, [&](T x) { return static_cast<T>(negate_element(c(x))); });
      case ElementwiseKind::Relu:
        return unary_loop<T, T>(iter, [&](T x) { return x < T(0) ? T(0) : x; });
      case ElementwiseKind::Abs:
        return unary_loop<T, T>(
            iter, [&](T x) { return static_cast<T>(x < T(0) ? negate_element(x) : x); });
      case ElementwiseKind::Sign:
        return unary_loop<T, T>(iter, [&](T x) { return static_cast<T>((T(0) < x) - (x < T(0))); });
      case ElementwiseKind::Pow: {
        const int64_t e = op.scalar.to<int64_t>();
        return unary_loop<T, T>(iter, [&](T x) { return int_pow<C>(x, e); });
      }
      default:
        break;
    }
  }
  unsupported(op, iter.dtype(1));
}

// The binary function of `op` in compute type C; Cmp is true for comparisons (bool results).
template <typename T, typename Out, typename F>
void run_binary_with(const TensorIterator& iter, const ElementwiseOp& op, F f) {
  using C = compute_t<T>;
  const auto g = [&](T a, T b) { return f(static_cast<C>(a), static_cast<C>(b)); };
  if (!op.scalar_operand) {
    binary_loop<Out, T>(iter, g);
    return;
  }
  const C s = op.scalar.to<C>();
  if constexpr (std::is_same_v<C, T>) {
    // The scalar is exact in T: the tensor-tensor row serves, with the scalar broadcast.
    binary_scalar_loop<Out, T>(iter, s, op.scalar_first, g);
    return;
  } else if (op.scalar_first) {
    unary_loop<Out, T>(iter, [&](T a) { return f(s, static_cast<C>(a)); });
  } else {
    unary_loop<Out, T>(iter, [&](T a) { return f(static_cast<C>(a), s); });
  }
}

template <typename T>
void run_binary(const TensorIterator& iter, const ElementwiseOp& op) {
  using C = compute_t<T>;
  switch (op.kind) {
    case ElementwiseKind::Eq:
      return run_binary_with<T, bool>(iter, op, [](C a, C b) { return a == b; });
    case ElementwiseKind::Ne:
      return run_binary_with<T, bool>(iter, op, [](C a, C b) { return a != b; });
    case ElementwiseKind::Lt:
      return run_binary_with<T, bool>(iter, op, [](C a, C b) { return a < b; });
    case ElementwiseKind::Le:
      return run_binary_with<T, bool>(iter, op, [](C a, C b) { return a <= b; });
    case ElementwiseKind::Gt:
      return run_binary_with<T, bool>(iter, op, [](C a, C b) { return a > b; });
    case ElementwiseKind::Ge:
      return run_binary_with<T, bool>(iter, op, [](C a, C b) { return a >= b; });
    default:
      break;
  }
  if constexpr (std::is_same_v<T, bool>) {
    if (op.kind == ElementwiseKind::Add && op.alpha.to<bool>()) {
      return run_binary_with<T, T>(iter, op, [](bool a, bool b) { return a || b; });
    }
    if (op.kind == ElementwiseKind::Mul) {
      return run_binary_with<T, T>(iter, op, [](bool a, bool b) { return a && b; });
    }
  } else {
    const C alpha = op.alpha.to<C>();
    switch (op.kind) {
      case ElementwiseKind::Add:
        if (alpha == C(1))
          return run_binary_with<T, T>(iter, op, [](C a, C b) { return wrapping_add(a, b); });
        return run_binary_with<T, T>(
            iter, op, [=](C a, C b) { return wrapping_add(a, wrapping_mul(alpha, b)); });
      case ElementwiseKind::Sub:
        if (alpha == C(1))
          return run_binary_with<T, T>(iter, op, [](C a, C b) { return wrapping_sub(a, b); });
        return run_binary_with<T, T>(
            iter, op, [=](C a, C b) { return wrapping_sub(a, wrapping_mul(alpha, b)); });
      case ElementwiseKind::Mul:
        return run_binary_with<T, T>(iter, op, [](C a, C b) { return wrapping_mul(a, b); });
      case ElementwiseKind::ReluBackward:
        return run_binary_with<T, T>(iter, op, [](C g, C y) { return y > C(0) ? g : C(0); });
      default:
        break;
    }
    if constexpr (is_float_v<T>) {
      switch (op.kind) {
        case ElementwiseKind::Div:
          return run_binary_with<T, T>(iter, op, [](C a, C b) { return a / b; });
        case ElementwiseKind::SigmoidBackward:
          return run_binary_with<T, T>(iter, op, [](C g, C y) { return g * (C(1) - y) * y; });
        case ElementwiseKind::TanhBackward:
          return run_binary_with<T, T>(iter, op, [](C g, C y) { return g * (C(1) - y * y); });
        case ElementwiseKind::GeluBackward:
          return run_binary_with<T, T>(iter, op, [](C g, C x) { return g * gelu_grad(x); });
        case ElementwiseKind::GeluTanhBackward:
          return run_binary_with<T, T>(iter, op, [](C g, C x) { return g * gelu_tanh_grad(x); });
        default:
          break;
      }
    }
  }
  unsupported(op, iter.dtype(1));
}

void elementwise_kernel(const TensorIterator& iter, const ElementwiseOp& op) {
  if (iter.numel() == 0) return;
  if (op.kind == ElementwiseKind::Where) {
    visit_dtype(iter.dtype(2), [&]<typename T>() {
      if constexpr (std::is_same_v<compute_t<T>, std::complex<float>> ||
                    std::is_same_v<compute_t<T>, std::complex<double>>) {
        unsupported(op, iter.dtype(2));
      } else {
        where_loop<T>(iter);
      }
    });
    return;
  }
  const ScalarType t = iter.dtype(1);
  switch (t) {
#define FERRY_ELEMENTWISE_CASE(cpp, name)  \
  case ScalarType::name:                   \
    if (elementwise_arity(op.kind) == 1) { \
      run_unary<cpp>(iter, op);            \
    } else {                               \
      run_binary<cpp>(iter, op);           \
    }                                      \
    return;
    FERRY_ELEMENTWISE_CASE(bool, Bool)
    FERRY_ELEMENTWISE_CASE(uint8_t, UInt8)
    FERRY_ELEMENTWISE_CASE(int8_t, Int8)
    FERRY_ELEMENTWISE_CASE(int16_t, Int16)
    FERRY_ELEMENTWISE_CASE(int32_t, Int32)
    FERRY_ELEMENTWISE_CASE(int64_t, Int64)
    FERRY_ELEMENTWISE_CASE(Half, Float16)
    FERRY_ELEMENTWISE_CASE(BFloat16, BFloat16)
    FERRY_ELEMENTWISE_CASE(float, Float32)
    FERRY_ELEMENTWISE_CASE(double, Float64)
#undef FERRY_ELEMENTWISE_CASE
    default:
      break;
  }
  unsupported(op, t);
}

}  // namespace

FERRY_REGISTER_DISPATCH(elementwise_stub, DeviceType::CPU, &elementwise_kernel);

}  // namespace ferry::cpu
