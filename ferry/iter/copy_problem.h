// The one description of a copy that every copy kernel receives (the CPU engine, the sim's and
// CUDA's device kernels): a copy iterator's shape after broadcasting, reordering and coalescing,
// its byte strides and data pointers, the two dtypes, and the lazy-bit work (conj, neg) decided
// by the one rule below. Built from an iterator by copy_problem_from, from two dense tensors by
// copy_impl's fast path, and for a fill by the device fill.
// Invariants (the TensorIterator's postconditions):
//  - sizes, dst_strides and src_strides have the same length (possibly 0: one element);
//  - every size is >= 2 except in a 1-d problem, and no two adjacent dims could be merged;
//  - dims are ordered fastest-first for dst: dst_strides is non-decreasing where dst is dense;
//  - strides are in bytes; src strides may be 0 (broadcast), dst strides never alias.
// The values stored are src's converted to dst_dtype, conjugated if `conj`, negated if `neg`.
#pragma once

#include <cstdint>

#include "ferry/core/scalar_type.h"
#include "ferry/core/small_vector.h"

namespace ferry {

class Tensor;
class TensorIterator;

struct CopyProblem {
  DimVector sizes;
  DimVector dst_strides;
  DimVector src_strides;
  char* dst = nullptr;
  const char* src = nullptr;  // unused when src_is_value
  ScalarType dst_dtype = ScalarType::Float32;
  ScalarType src_dtype = ScalarType::Float32;
  bool conj = false;
  bool neg = false;
  // A fill (device kernels only): every element reads `value` (one src_dtype element in its
  // first bytes), carried in the problem itself so that no memory has to outlive the call; src
  // strides are all 0. The CPU engine reads through `src`: point it at the value first.
  bool src_is_value = false;
  alignas(16) unsigned char value[16] = {};

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    return n;
  }
  int ndim() const { return static_cast<int>(sizes.size()); }
};

// What a copy applies after converting, in dst's type: conj where the two operands' conj bits
// differ (complex destinations only), neg where their neg bits differ. A view with a bit set
// reads back the transformed value, so storing the transform makes dst read as src.
struct CopyLazyBits {
  bool conj = false;
  bool neg = false;
};
// The rule, once, for every copy path.
inline CopyLazyBits copy_lazy_bits(ScalarType dst_dtype, bool dst_conj, bool dst_neg, bool src_conj,
                                   bool src_neg) {
  return CopyLazyBits{is_complex(dst_dtype) && dst_conj != src_conj, dst_neg != src_neg};
}
CopyLazyBits copy_lazy_bits(const Tensor& dst, const Tensor& src);
// For a copy iterator (dst operand 0, src operand 1).
CopyLazyBits copy_lazy_bits(const TensorIterator& copy_iter);

// The problem a built copy iterator describes (operand 0 the destination, operand 1 the
// source): nothing is recomputed, the iterator's postconditions are the problem's invariants.
CopyProblem copy_problem_from(const TensorIterator& copy_iter);

}  // namespace ferry
