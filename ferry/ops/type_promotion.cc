// Type promotion by category (see type_promotion.h).
#include "ferry/ops/type_promotion.h"

#include "ferry/core/error.h"

namespace ferry {
namespace {

int category(ScalarType t) {
  if (t == kBool) return 0;
  if (is_integral(t)) return 1;
  if (is_floating_point(t)) return 2;
  return 3;
}

ScalarType to_complex(ScalarType t) { return t == kFloat64 ? kComplex128 : kComplex64; }

// PyTorch's combine_categories: `higher` wins unless `lower` is of a higher category.
std::optional<ScalarType> combine(std::optional<ScalarType> higher,
                                  std::optional<ScalarType> lower) {
  if (!higher) return lower;
  if (!lower) return higher;
  if (is_complex(*higher)) return higher;
  if (is_complex(*lower)) return is_floating_point(*higher) ? to_complex(*higher) : *lower;
  if (is_floating_point(*higher)) return higher;
  if (*higher == kBool || is_floating_point(*lower)) return promote_types(*higher, *lower);
  return higher;
}

void update(std::optional<ScalarType>& slot, ScalarType t) {
  slot = slot ? promote_types(*slot, t) : t;
}

}  // namespace

ScalarType promote_types(ScalarType a, ScalarType b) {
  if (a == b) return a;
  const bool fp8 =
      a == kFloat8_e4m3fn || a == kFloat8_e5m2 || b == kFloat8_e4m3fn || b == kFloat8_e5m2;
  FERRY_CHECK_AS(DTypeError, !fp8, "promote_types: float8 types promote with no other type, but ",
                 "got ", a, " and ", b);
  if (a == kBool) return b;
  if (b == kBool) return a;
  const int ca = category(a), cb = category(b);
  if (ca != cb) {
    const ScalarType hi = ca > cb ? a : b, lo = ca > cb ? b : a;
    if (is_complex(hi) && lo == kFloat64) return kComplex128;
    return hi;
  }
  if (ca == 1) {
    // uint8 with a signed type: the smallest signed type that holds both.
    if (a == kUInt8 || b == kUInt8) {
      const ScalarType other = a == kUInt8 ? b : a;
      return other == kInt8 ? kInt16 : other;
    }
    return element_size(a) >= element_size(b) ? a : b;
  }
  if (ca == 2) {
    if ((a == kFloat16 && b == kBFloat16) || (a == kBFloat16 && b == kFloat16)) return kFloat32;
    return element_size(a) >= element_size(b) ? a : b;
  }
  return element_size(a) >= element_size(b) ? a : b;
}

ResultType& ResultType::add(const Tensor& t) {
  if (!t.defined()) return *this;
  update(t.dim() > 0 ? dim_ : zero_dim_, t.dtype());
  return *this;
}

ResultType& ResultType::add(const Scalar& s) {
  const ScalarType t = s.is_bool()       ? kBool
                       : s.is_integral() ? kInt64
                       : s.is_complex()  ? kComplex64
                                         : kFloat32;
  update(wrapped_, t);
  return *this;
}

ScalarType ResultType::result() const {
  const std::optional<ScalarType> r = combine(dim_, combine(zero_dim_, wrapped_));
  FERRY_CHECK_AS(DTypeError, r.has_value(), "result_type: expected at least one operand");
  return *r;
}

ScalarType result_type(const Tensor& a, const Tensor& b) {
  return ResultType().add(a).add(b).result();
}

ScalarType result_type(const Tensor& a, const Scalar& b) {
  return ResultType().add(a).add(b).result();
}

ScalarType to_floating(ScalarType t) {
  return is_floating_point(t) || is_complex(t) ? t : kFloat32;
}

}  // namespace ferry
