// DimCounter and the serial 2-D driver (see dim_counter.h).
#include "ferry/iter/dim_counter.h"

#include <algorithm>

#include "ferry/core/error.h"

namespace ferry {

DimCounter::DimCounter(IntArrayRef shape, Range range)
    : shape_(shape), range_(range), values_(shape.size(), 0), offset_(range.begin) {
  // Mixed-radix decomposition of the starting index, dimension 0 being the lowest digit.
  int64_t rest = range.begin;
  for (size_t d = 0; d < shape.size() && rest > 0; ++d) {
    if (shape[d] > 0) {
      values_[d] = rest % shape[d];
      rest /= shape[d];
    }
  }
  FERRY_CHECK(rest == 0 || range.size() <= 0, "DimCounter: range start ", range.begin,
              " lies outside the shape ", shape);
}

std::array<int64_t, 2> DimCounter::max_2d_step() const {
  const int64_t left = range_.end - offset_;
  if (shape_.empty()) return {std::min<int64_t>(left, 1), 1};
  const int64_t step0 = std::min(shape_[0] - values_[0], left);
  int64_t step1 = 1;
  // Whole rows only: a partial row must finish before dim 1 can be stepped through.
  if (step0 == shape_[0] && shape_.size() > 1) {
    step1 = std::min(shape_[1] - values_[1], left / shape_[0]);
  }
  return {step0, step1};
}

void DimCounter::increment(const std::array<int64_t, 2>& step) {
  offset_ += step[0] * step[1];
  size_t d = 0;
  int64_t carry = step[0];
  if (step[1] != 1) {
    // A multi-row step began at the start of a row and covered whole rows: dim 0 is unchanged.
    d = 1;
    carry = step[1];
  }
  for (; d < values_.size() && carry > 0; ++d) {
    int64_t v = values_[d] + carry;
    if (v >= shape_[d]) {
      v -= shape_[d];
      carry = 1;
    } else {
      carry = 0;
    }
    values_[d] = v;
  }
}

void serial_for_each_2d(IntArrayRef shape, const int64_t* strides, char* const* base, int ntensors,
                        Loop2d loop, Range range) {
  if (range.size() <= 0) return;
  constexpr int kInlineOperands = 8;
  FERRY_CHECK(ntensors <= kInlineOperands, "serial_for_each_2d: expected at most ", kInlineOperands,
              " operands, but got ", ntensors);
  char* ptrs[kInlineOperands];
  if (shape.size() <= 1) {
    // One dimension (or none): a single run, offset to the range's start.
    for (int a = 0; a < ntensors; ++a) ptrs[a] = base[a] + range.begin * strides[a];
    loop(ptrs, strides, range.size(), 1);
    return;
  }
  DimCounter counter(shape, range);
  while (!counter.is_done()) {
    const IntArrayRef at = counter.values();
    for (int a = 0; a < ntensors; ++a) {
      char* p = base[a];
      for (size_t d = 0; d < at.size(); ++d) p += at[d] * strides[d * ntensors + a];
      ptrs[a] = p;
    }
    const auto step = counter.max_2d_step();
    loop(ptrs, strides, step[0], step[1]);
    counter.increment(step);
  }
}

}  // namespace ferry
