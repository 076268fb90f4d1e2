// The copy_stub's table (backends fill it when the library loads) and the lazy-bit rule every
// copy kernel follows.
#include "ferry/iter/copy_stub.h"

namespace ferry {

FERRY_DEFINE_DISPATCH(copy_stub);

CopyLazyBits copy_lazy_bits(const TensorIterator& copy_iter) {
  const Tensor& dst = copy_iter.tensor(0);
  const Tensor& src = copy_iter.tensor(1);
  return CopyLazyBits{is_complex(dst.dtype()) && dst.is_conj() != src.is_conj(),
                      dst.is_neg() != src.is_neg()};
}

}  // namespace ferry
