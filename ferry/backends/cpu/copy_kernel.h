// The CPU copy_stub kernel's front half: the CopyProblem a built copy iterator describes.
// Shared by the kernel and by `ferry explain`, so that what explain prints is what runs.
#pragma once

#include "ferry/backends/cpu/copy_plan.h"
#include "ferry/iter/tensor_iterator.h"

namespace ferry::cpu {

// Operand 0 is the destination, operand 1 the source. conj and neg are set where the tensors'
// lazy bits differ (conj only matters, and is only set, for a complex destination).
CopyProblem copy_problem_from(const TensorIterator& iter);

// The CPU copy_stub kernel: copy_problem_from, then the plan's kernel.
void copy_kernel(TensorIterator& iter, bool non_blocking);

}  // namespace ferry::cpu
