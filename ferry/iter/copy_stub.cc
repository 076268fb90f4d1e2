// The copy stubs' tables (backends fill them when the library loads) and the CopyProblem of a
// copy iterator.
#include "ferry/iter/copy_stub.h"

namespace ferry {

FERRY_DEFINE_DISPATCH(copy_stub);
FERRY_DEFINE_DISPATCH(copy_problem_stub);

CopyLazyBits copy_lazy_bits(const Tensor& dst, const Tensor& src) {
  return copy_lazy_bits(dst.dtype(), dst.is_conj(), dst.is_neg(), src.is_conj(), src.is_neg());
}

CopyLazyBits copy_lazy_bits(const TensorIterator& copy_iter) {
  return copy_lazy_bits(copy_iter.tensor(0), copy_iter.tensor(1));
}

CopyProblem copy_problem_from(const TensorIterator& copy_iter) {
  FERRY_CHECK(copy_iter.ntensors() == 2 && copy_iter.noutputs() == 1,
              "copy kernel: expected an iterator with one output and one input, but got ",
              copy_iter.noutputs(), " output(s) and ", copy_iter.ninputs(), " input(s)");
  CopyProblem p;
  p.sizes = DimVector(copy_iter.shape());
  p.dst_strides = DimVector(copy_iter.strides(0));
  p.src_strides = DimVector(copy_iter.strides(1));
  p.dst = static_cast<char*>(copy_iter.data_ptr(0));
  p.src = static_cast<const char*>(copy_iter.data_ptr(1));
  p.dst_dtype = copy_iter.dtype(0);
  p.src_dtype = copy_iter.dtype(1);
  const CopyLazyBits bits = copy_lazy_bits(copy_iter);
  p.conj = bits.conj;
  p.neg = bits.neg;
  return p;
}

}  // namespace ferry
