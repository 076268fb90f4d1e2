// The scalar functions of every ElementwiseKind, FERRY_HOST_DEVICE so that the CUDA elementwise
// kernel runs exactly the arithmetic the host tests check against the CPU kernel
// (ferry/backends/cpu/math/elementwise_kernel.cc): the same compute types (float for float16 and
// bfloat16, the type itself otherwise), the same expressions in the same order, and the same
// table of which kinds a dtype takes (defined_for), so a dtype the CPU refuses is refused here.
#pragma once

#include <math.h>

#include <cstdint>
#include <type_traits>

#include "ferry/core/bfloat16.h"
#include "ferry/core/float_bits.h"
#include "ferry/core/half.h"
#include "ferry/iter/elementwise_stub.h"

namespace ferry::cuda::ew {

template <typename T>
using compute_t =
    std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;

// The C math library on the host, CUDA's math API on the device; qualified so that no ferry
// function of the same name can hide them.
FERRY_HOST_DEVICE inline float exp_(float x) { return ::expf(x); }
FERRY_HOST_DEVICE inline double exp_(double x) { return ::exp(x); }
FERRY_HOST_DEVICE inline float log_(float x) { return ::logf(x); }
FERRY_HOST_DEVICE inline double log_(double x) { return ::log(x); }
FERRY_HOST_DEVICE inline float sqrt_(float x) { return ::sqrtf(x); }
FERRY_HOST_DEVICE inline double sqrt_(double x) { return ::sqrt(x); }
FERRY_HOST_DEVICE inline float tanh_(float x) { return ::tanhf(x); }
FERRY_HOST_DEVICE inline double tanh_(double x) { return ::tanh(x); }
FERRY_HOST_DEVICE inline float erf_(float x) { return ::erff(x); }
FERRY_HOST_DEVICE inline double erf_(double x) { return ::erf(x); }
FERRY_HOST_DEVICE inline float pow_(float x, float e) { return ::powf(x, e); }
FERRY_HOST_DEVICE inline double pow_(double x, double e) { return ::pow(x, e); }
FERRY_HOST_DEVICE inline float abs_(float x) { return ::fabsf(x); }
FERRY_HOST_DEVICE inline double abs_(double x) { return ::fabs(x); }

// The double values of std::numbers::sqrt2 and std::numbers::inv_sqrtpi (the CPU kernel's).
inline constexpr double kSqrt2 = 1.41421356237309504880;
inline constexpr double kInvSqrtPi = 0.56418958354775628695;

template <typename C>
FERRY_HOST_DEVICE inline C gelu(C x) {
  return static_cast<C>(0.5) * x * (C(1) + erf_(x * static_cast<C>(kSqrt2 / 2)));
}
template <typename C>
FERRY_HOST_DEVICE inline C gelu_tanh(C x) {
  const C beta = static_cast<C>(kSqrt2 * kInvSqrtPi);  // sqrt(2/pi)
  const C kappa = static_cast<C>(0.044715);
  return static_cast<C>(0.5) * x * (C(1) + tanh_(beta * (x + kappa * x * x * x)));
}
template <typename C>
FERRY_HOST_DEVICE inline C gelu_grad(C x) {
  const C cdf = static_cast<C>(0.5) * (C(1) + erf_(x * static_cast<C>(kSqrt2 / 2)));
  const C pdf = exp_(static_cast<C>(-0.5) * x * x) * static_cast<C>(kInvSqrtPi / kSqrt2);
  return cdf + x * pdf;
}
template <typename C>
FERRY_HOST_DEVICE inline C gelu_tanh_grad(C x) {
  const C beta = static_cast<C>(kSqrt2 * kInvSqrtPi);
  const C kappa = static_cast<C>(0.044715);
  const C inner = beta * (x + kappa * x * x * x);
  const C t = tanh_(inner);
  const C left = static_cast<C>(0.5) * x;
  const C right = C(1) + t;
  const C d_inner = beta * (C(1) + C(3) * kappa * x * x);
  return static_cast<C>(0.5) * right + left * (C(1) - t * t) * d_inner;
}

// Integer power by squaring (negative exponents of integers are refused by the front-end).
template <typename C>
FERRY_HOST_DEVICE inline C int_pow(C base, int64_t exp) {
  C result = 1;
  while (exp > 0) {
    if (exp & 1) result = static_cast<C>(result * base);
    base = static_cast<C>(base * base);
    exp >>= 1;
  }
  return result;
}

// x < 0, without comparing an unsigned type with zero (a warning nvcc makes an error).
template <typename C>
FERRY_HOST_DEVICE inline bool negative(C x) {
  if constexpr (std::is_signed_v<C>) {
    return x < C(0);
  } else {
    return false;
  }
}

// The op's scalars in the compute type. Trivially copyable: kernels take it by value.
template <typename C>
struct Scalars {
  ElementwiseKind kind = ElementwiseKind::Add;
  C alpha{};                 // Add / Sub
  C scalar{};                // Pow's exponent (floating types), or the scalar operand
  int64_t int_exponent = 0;  // Pow's exponent (integer types)
  bool scalar_operand = false;
  bool scalar_first = false;
};

// out = f(x) for a unary kind.
template <typename C>
FERRY_HOST_DEVICE inline C unary(const Scalars<C>& s, C x) {
  using K = ElementwiseKind;
  if constexpr (std::is_floating_point_v<C>) {
    switch (s.kind) {
      case K::Neg:
        return -x;
      case K::Exp:
        return exp_(x);
      case K::Log:
        return log_(x);
      case K::Sqrt:
        return sqrt_(x);
      case K::Rsqrt:
        return C(1) / sqrt_(x);
      case K::Tanh:
        return tanh_(x);
      case K::Sigmoid:
        return C(1) / (C(1) + exp_(-x));
      case K::Relu:
        return x < C(0) ? C(0) : x;
      case K::Gelu:
        return gelu(x);
      case K::GeluTanh:
        return gelu_tanh(x);
      case K::Abs:
        return abs_(x);
      case K::Sign:
        return x > C(0) ? C(1) : x < C(0) ? C(-1) : x;  // 0 and NaN stay
      case K::Pow:
        if (s.scalar == C(2)) return x * x;
        if (s.scalar == C(0.5)) return sqrt_(x);
        return pow_(x, s.scalar);
      default:
        return x;  // not reached: defined_for refuses the kind before any launch
    }
  } else if constexpr (std::is_same_v<C, bool>) {
    return x;  // no unary kind takes bool (defined_for)
  } else {
    switch (s.kind) {
      case K::Neg:
        return static_cast<C>(-x);
      case K::Relu:
        return negative(x) ? C(0) : x;
      case K::Abs:
        return static_cast<C>(negative(x) ? -x : x);
      case K::Sign:
        return static_cast<C>((C(0) < x) - negative(x));
      case K::Pow:
        return int_pow<C>(x, s.int_exponent);
      default:
        return x;
    }
  }
}

// out = f(a, b) for a binary kind that is not a comparison.
template <typename C>
FERRY_HOST_DEVICE inline C binary(const Scalars<C>& s, C a, C b) {
  using K = ElementwiseKind;
  if constexpr (std::is_same_v<C, bool>) {
    return s.kind == K::Mul ? (a && b) : (a || b);  // Add (with a true alpha) or Mul
  } else {
    switch (s.kind) {
      case K::Add:
        return static_cast<C>(a + s.alpha * b);
      case K::Sub:
        return static_cast<C>(a - s.alpha * b);
      case K::Mul:
        return static_cast<C>(a * b);
      case K::ReluBackward:
        return b > C(0) ? a : C(0);
      default:
        break;
    }
    if constexpr (std::is_floating_point_v<C>) {
      switch (s.kind) {
        case K::Div:
          return a / b;
        case K::SigmoidBackward:
          return a * (C(1) - b) * b;
        case K::TanhBackward:
          return a * (C(1) - b * b);
        case K::GeluBackward:
          return a * gelu_grad(b);
        case K::GeluTanhBackward:
          return a * gelu_tanh_grad(b);
        default:
          break;
      }
    }
    return a;
  }
}

template <typename C>
FERRY_HOST_DEVICE inline bool compare(ElementwiseKind kind, C a, C b) {
  using K = ElementwiseKind;
  switch (kind) {
    case K::Eq:
      return a == b;
    case K::Ne:
      return a != b;
    case K::Lt:
      return a < b;
    case K::Le:
      return a <= b;
    case K::Gt:
      return a > b;
    case K::Ge:
      return a >= b;
    default:
      return false;
  }
}

// Eq, Ne, Lt, Le, Gt, Ge (is_comparison, callable on the device).
FERRY_HOST_DEVICE constexpr bool is_compare(ElementwiseKind k) {
  return k >= ElementwiseKind::Eq && k <= ElementwiseKind::Ge;
}

// The value of one output element from one tensor input: a unary kind, or a binary kind whose
// other operand is the scalar. Out is T, or bool for comparisons.
template <typename T, typename Out>
FERRY_HOST_DEVICE inline Out apply1(const Scalars<compute_t<T>>& s, T x) {
  using C = compute_t<T>;
  const C c = static_cast<C>(x);
  if constexpr (std::is_same_v<Out, bool>) {
    if (is_compare(s.kind)) {
      return s.scalar_first ? compare<C>(s.kind, s.scalar, c) : compare<C>(s.kind, c, s.scalar);
    }
  }
  if constexpr (std::is_same_v<Out, bool> && !std::is_same_v<T, bool>) {
    return false;  // not reached: a bool output of non-bool inputs is a comparison
  } else {
    if (!s.scalar_operand) return static_cast<Out>(unary<C>(s, c));
    return static_cast<Out>(s.scalar_first ? binary<C>(s, s.scalar, c) : binary<C>(s, c, s.scalar));
  }
}

// The value of one output element from two tensor inputs.
template <typename T, typename Out>
FERRY_HOST_DEVICE inline Out apply2(const Scalars<compute_t<T>>& s, T a, T b) {
  using C = compute_t<T>;
  if constexpr (std::is_same_v<Out, bool>) {
    if (is_compare(s.kind)) return compare<C>(s.kind, static_cast<C>(a), static_cast<C>(b));
  }
  if constexpr (std::is_same_v<Out, bool> && !std::is_same_v<T, bool>) {
    return false;  // not reached
  } else {
    return static_cast<Out>(binary<C>(s, static_cast<C>(a), static_cast<C>(b)));
  }
}

// Whether the CPU kernel defines `op` for inputs of dtype t (it raises DTypeError otherwise):
// floating types take every kind; integers the sign-agnostic arithmetic, comparisons, relu and
// its backward, and pow; bool only comparisons, add (with a true alpha, as or) and mul (as
// and); where takes every dtype but the complex ones.
inline bool defined_for(const ElementwiseOp& op, ScalarType t) {
  using K = ElementwiseKind;
  const K k = op.kind;
  if (k == K::Where) return !is_complex(t);
  const bool is_float = t == kFloat16 || t == kBFloat16 || t == kFloat32 || t == kFloat64;
  if (!is_float && !is_integral(t, /*include_bool=*/true)) return false;
  if (is_comparison(k)) return true;
  if (elementwise_arity(k) == 1) {
    if (is_float) return true;
    if (t == kBool) return false;
    return k == K::Neg || k == K::Relu || k == K::Abs || k == K::Sign || k == K::Pow;
  }
  if (t == kBool) return (k == K::Add && op.alpha.to<bool>()) || k == K::Mul;
  if (k == K::Add || k == K::Sub || k == K::Mul || k == K::ReluBackward) return true;
  return is_float;  // Div and the activations' backward helpers
}

}  // namespace ferry::cuda::ew
