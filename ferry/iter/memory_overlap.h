// Memory overlap queries: whether a tensor's elements alias each other, and how two tensors'
// bytes relate. Writers use them to refuse destinations that alias themselves and to notice a
// source that a write would clobber before it is read. Answers are conservative in one
// direction only: No and Full are exact; Partial may be reported for tensors whose byte ranges
// interleave without sharing an element (e.g. the even and the odd columns of one matrix).
#pragma once

#include <iosfwd>

#include "ferry/core/tensor.h"

namespace ferry {

enum class MemOverlap {
  No,       // every element has its own bytes
  Yes,      // some elements share bytes (a dimension of size > 1 with stride 0)
  TooHard,  // neither could be proven cheaply (e.g. as_strided with crossing strides)
};

enum class MemOverlapStatus {
  No,       // the tensors share no byte
  Full,     // the same bytes in the same element order: element i of one is element i of other
  Partial,  // the byte ranges intersect in any other way
};

std::ostream& operator<<(std::ostream& out, MemOverlap overlap);
std::ostream& operator<<(std::ostream& out, MemOverlapStatus status);

// Yes for a size > 1 dimension with stride 0; No for non-overlapping-and-dense tensors and for
// strides that, sorted, each exceed the span of the dimensions below them; TooHard otherwise.
MemOverlap has_internal_overlap(const Tensor& t);

// Compares the byte ranges the two tensors' elements occupy. Tensors on different devices, and
// empty tensors, never overlap. Full needs the same first byte, sizes, element size and strides.
// Works on addresses rather than on storage identity, so that two from_blob tensors over the
// same memory are seen to overlap too.
MemOverlapStatus get_overlap_status(const Tensor& a, const Tensor& b);

}  // namespace ferry
