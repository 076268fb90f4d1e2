// Memory overlap queries on sizes, strides and addresses; no element is read.
#include "ferry/iter/memory_overlap.h"

#include <algorithm>
#include <ostream>

namespace ferry {

std::ostream& operator<<(std::ostream& out, MemOverlap overlap) {
  switch (overlap) {
    case MemOverlap::No:
      return out << "no";
    case MemOverlap::Yes:
      return out << "yes";
    case MemOverlap::TooHard:
      return out << "too hard";
  }
  return out << "?";
}

std::ostream& operator<<(std::ostream& out, MemOverlapStatus status) {
  switch (status) {
    case MemOverlapStatus::No:
      return out << "no";
    case MemOverlapStatus::Full:
      return out << "full";
    case MemOverlapStatus::Partial:
      return out << "partial";
  }
  return out << "?";
}

MemOverlap has_internal_overlap(const Tensor& t) {
  if (t.is_contiguous()) return MemOverlap::No;
  const IntArrayRef sizes = t.sizes(), strides = t.strides();
  // Dimensions of size 0 or 1 never make two elements share bytes (size 0: there are none).
  SmallVector<int64_t, kInlineDims> dims;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) return MemOverlap::No;
    if (sizes[d] == 1) continue;
    if (strides[d] == 0) return MemOverlap::Yes;
    dims.push_back(static_cast<int64_t>(d));
  }
  std::sort(dims.begin(), dims.end(),
            [&](int64_t a, int64_t b) { return strides[a] < strides[b]; });
  // Sorted by stride, each dimension must step past everything the smaller ones can reach;
  // then every index has its own offset. Two equal strides make (1, 0) and (0, 1) collide.
  int64_t span = 0;
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = dims[i];
    if (i > 0 && strides[d] == strides[dims[i - 1]]) return MemOverlap::Yes;
    if (strides[d] <= span) return MemOverlap::TooHard;
    span += (sizes[d] - 1) * strides[d];
  }
  return MemOverlap::No;
}

namespace {

// [first byte, one past the last byte) of the elements; strides are never negative in ferry.
struct ByteRange {
  const char* begin;
  const char* end;
};

ByteRange byte_range(const Tensor& t) {
  const auto* begin = static_cast<const char*>(t.const_data_ptr());
  int64_t last = 0;
  for (size_t d = 0; d < t.sizes().size(); ++d) last += (t.sizes()[d] - 1) * t.strides()[d];
  const auto itemsize = static_cast<int64_t>(t.element_size());
  return {begin, begin + (last + 1) * itemsize};
}

bool same_element_order(const Tensor& a, const Tensor& b) {
  if (a.element_size() != b.element_size() || !a.sizes().equals(b.sizes())) return false;
  for (size_t d = 0; d < a.sizes().size(); ++d) {
    if (a.sizes()[d] > 1 && a.strides()[d] != b.strides()[d]) return false;
  }
  return true;
}

}  // namespace

MemOverlapStatus get_overlap_status(const Tensor& a, const Tensor& b) {
  if (a.is_same(b)) return MemOverlapStatus::Full;
  if (a.numel() == 0 || b.numel() == 0 || a.device() != b.device()) return MemOverlapStatus::No;
  if (a.const_data_ptr() == nullptr || b.const_data_ptr() == nullptr) return MemOverlapStatus::No;
  const ByteRange ra = byte_range(a), rb = byte_range(b);
  if (ra.begin >= rb.end || rb.begin >= ra.end) return MemOverlapStatus::No;
  if (ra.begin == rb.begin && same_element_order(a, b)) return MemOverlapStatus::Full;
  return MemOverlapStatus::Partial;
}

}  // namespace ferry
