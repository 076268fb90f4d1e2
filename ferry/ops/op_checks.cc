// The shared argument checks of the linear-algebra and nn operators (see op_checks.h).
#include "ferry/ops/op_checks.h"

namespace ferry::op_checks {

void check_same_device(const char* op, std::initializer_list<const Tensor*> tensors) {
  const Tensor* first = nullptr;
  for (const Tensor* t : tensors) {
    if (t == nullptr || !t->defined()) continue;
    if (first == nullptr) {
      first = t;
      continue;
    }
    FERRY_CHECK_AS(DeviceError, t->device() == first->device(), op,
                   ": Expected all tensors to be on the same device, but found at least two "
                   "devices, ",
                   first->device(), " and ", t->device(), "!");
  }
}

void check_floating(const char* op, const char* name, const Tensor& t) {
  const ScalarType d = t.dtype();
  FERRY_CHECK_AS(DTypeError, d == kFloat32 || d == kBFloat16 || d == kFloat16 || d == kFloat64, op,
                 ": expected ", name,
                 " of a floating dtype (float32, bfloat16, float16 or float64), but got ", d);
}

void check_same_dtype(const char* op, const char* name_a, const Tensor& a, const char* name_b,
                      const Tensor& b) {
  FERRY_CHECK_AS(DTypeError, a.dtype() == b.dtype(), op, ": expected ", name_a, " and ", name_b,
                 " to have the same dtype, but got: ", a.dtype(), " != ", b.dtype());
}

void check_index_dtype(const char* op, const char* name, const Tensor& t, bool allow_int32) {
  const bool ok = t.dtype() == kInt64 || (allow_int32 && t.dtype() == kInt32);
  FERRY_CHECK_AS(DTypeError, ok, op, ": expected ", name, " of dtype ",
                 allow_int32 ? "int64 or int32" : "int64", ", but got ", t.dtype());
}

std::array<int64_t, 2> pair_param(const char* op, const char* name, IntArrayRef values) {
  FERRY_CHECK_AS(ShapeError, values.size() == 1 || values.size() == 2, op, ": expected ", name,
                 " to be a single integer value or a list of 2 values, but got ", name, "=",
                 values);
  return values.size() == 1 ? std::array<int64_t, 2>{values[0], values[0]}
                            : std::array<int64_t, 2>{values[0], values[1]};
}

}  // namespace ferry::op_checks
