// The CPU copy_stub kernel: reads the coalesced iterator into a CopyProblem and runs it. The
// iterator's postconditions are exactly the CopyProblem's invariants (copy_plan.h), so nothing
// is recomputed here.
#include "ferry/backends/cpu/copy_kernel.h"

#include "ferry/iter/copy_stub.h"

namespace ferry::cpu {

CopyProblem copy_problem_from(const TensorIterator& iter) {
  FERRY_CHECK(iter.ntensors() == 2 && iter.noutputs() == 1,
              "copy kernel: expected an iterator with one output and one input, but got ",
              iter.noutputs(), " output(s) and ", iter.ninputs(), " input(s)");
  CopyProblem p;
  p.sizes = DimVector(iter.shape());
  p.dst_strides = DimVector(iter.strides(0));
  p.src_strides = DimVector(iter.strides(1));
  p.dst = static_cast<char*>(iter.data_ptr(0));
  p.src = static_cast<const char*>(iter.data_ptr(1));
  p.dst_dtype = iter.dtype(0);
  p.src_dtype = iter.dtype(1);
  const CopyLazyBits bits = copy_lazy_bits(iter);
  p.conj = bits.conj;
  p.neg = bits.neg;
  return p;
}

void copy_kernel(TensorIterator& iter, bool /*non_blocking: a CPU copy is always complete*/) {
  const CopyProblem problem = copy_problem_from(iter);
  run_copy(problem, plan_copy(problem));
}

FERRY_REGISTER_DISPATCH(copy_stub, DeviceType::CPU, &copy_kernel);

}  // namespace ferry::cpu
