// DimCounter: walks a linear range [begin, end) of an N-d shape (dimension 0 fastest) in the
// largest 2-D steps the shape allows, so that a loop over any rank is a sequence of calls to a
// 2-D loop body. Also the serial 2-D driver used by TensorIterator::serial_for_each.
// Invariant: `offset` is the linear index of `values` (the multi-index, dim 0 fastest), and
// begin <= offset <= end.
#pragma once

#include <array>
#include <cstdint>

#include "ferry/core/array_ref.h"
#include "ferry/core/small_vector.h"
#include "ferry/iter/function_ref.h"

namespace ferry {

// A half-open range of linear element indices.
struct Range {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

// The body of a 2-D loop. data[arg] points at the first element of operand `arg`;
// strides[arg] is its byte stride along the inner dimension and strides[ntensors + arg] along
// the outer one. It must visit size0 x size1 elements: data[arg] + i*strides[arg] +
// j*strides[ntensors + arg] for i < size0, j < size1.
using Loop2d = FunctionRef<void(char** data, const int64_t* strides, int64_t size0, int64_t size1)>;

class DimCounter {
 public:
  // `shape` must outlive the counter. Every size must be > 0 unless the range is empty.
  DimCounter(IntArrayRef shape, Range range);

  bool is_done() const { return offset_ >= range_.end; }
  // The largest rectangle starting at the current position that stays inside the range and
  // inside dims 0 and 1: {run along dim 0, rows along dim 1}. A partial first or last row
  // gives {n, 1}; step[1] > 1 only when step[0] is a whole row.
  std::array<int64_t, 2> max_2d_step() const;
  // Advances by step[0] * step[1] elements (a step from max_2d_step()).
  void increment(const std::array<int64_t, 2>& step);

  IntArrayRef values() const { return values_; }
  int64_t offset() const { return offset_; }

 private:
  IntArrayRef shape_;
  Range range_;
  DimVector values_;
  int64_t offset_;
};

// Runs `loop` over `range` of the iteration space (shape, strides), where strides holds
// ntensors byte strides per dimension, dimension-major (strides[d * ntensors + arg]) and at
// least 2 dimensions' worth (pad with zeros), and base[arg] is each operand's first element.
void serial_for_each_2d(IntArrayRef shape, const int64_t* strides, char* const* base, int ntensors,
                        Loop2d loop, Range range);

}  // namespace ferry
