// The CPU copy kernels: read the coalesced iterator into a CopyProblem (its postconditions are
// exactly the problem's invariants, so nothing is recomputed) or take the problem as given, plan
// it and run it.
#include "ferry/backends/cpu/copy_kernel.h"

#include "ferry/iter/copy_stub.h"

namespace ferry::cpu {

void copy_kernel(TensorIterator& iter, bool /*non_blocking: a CPU copy is always complete*/) {
  copy(copy_problem_from(iter));
}

FERRY_REGISTER_DISPATCH(copy_stub, DeviceType::CPU, &copy_kernel);
FERRY_REGISTER_DISPATCH(copy_problem_stub, DeviceType::CPU, &copy);

}  // namespace ferry::cpu
