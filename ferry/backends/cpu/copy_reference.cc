// The reference CPU copy (see copy_reference.h): an odometer over the problem's dimensions,
// dimension 0 fastest, reading and writing through memcpy so that any alignment works.
#include "ferry/backends/cpu/copy_reference.h"

#include <cstring>

#include "ferry/core/convert.h"
#include "ferry/core/scalar_type.h"
#include "ferry/iter/copy_element.h"

namespace ferry::cpu {
namespace {

template <typename S>
S load(const char* p) {
  if constexpr (std::is_same_v<S, bool>) {
    // Any non-zero byte is true; loading a bool object holding 2..255 would be undefined.
    uint8_t byte;
    std::memcpy(&byte, p, 1);
    return byte != 0;
  } else {
    S v;
    std::memcpy(&v, p, sizeof(S));
    return v;
  }
}

// One element: dst = copy_element(src). Instantiated per dtype pair; the walk below is written
// once and calls it through a pointer (a walk per pair took 20 s to compile under ASan).
using CopyOne = void (*)(const char* src, char* dst, bool conj, bool neg);
template <typename D, typename S>
void copy_one(const char* src, char* dst, bool conj, bool neg) {
  const D v = copy_element<D>(load<S>(src), conj, neg);
  std::memcpy(dst, &v, sizeof(D));
}

void copy_elements(const CopyProblem& p, CopyOne copy) {
  const int ndim = p.ndim();
  const int64_t n = p.numel();
  DimVector index(static_cast<size_t>(ndim), 0);
  int64_t dst_offset = 0, src_offset = 0;
  for (int64_t k = 0; k < n; ++k) {
    copy(p.src + src_offset, p.dst + dst_offset, p.conj, p.neg);
    for (int d = 0; d < ndim; ++d) {
      if (++index[d] < p.sizes[d]) {
        dst_offset += p.dst_strides[d];
        src_offset += p.src_strides[d];
        break;
      }
      index[d] = 0;
      dst_offset -= (p.sizes[d] - 1) * p.dst_strides[d];
      src_offset -= (p.sizes[d] - 1) * p.src_strides[d];
    }
  }
}

}  // namespace

void run_copy_reference(const CopyProblem& problem) {
  FERRY_CHECK(problem.dst_strides.size() == problem.sizes.size() &&
                  problem.src_strides.size() == problem.sizes.size(),
              "run_copy_reference: expected as many strides as sizes, but got sizes ",
              IntArrayRef(problem.sizes), ", dst strides ", IntArrayRef(problem.dst_strides),
              " and src strides ", IntArrayRef(problem.src_strides));
  const CopyOne copy = visit_dtype(problem.dst_dtype, [&]<typename D>() {
    return visit_dtype(problem.src_dtype, [&]<typename S>() -> CopyOne { return &copy_one<D, S>; });
  });
  copy_elements(problem, copy);
}

}  // namespace ferry::cpu
