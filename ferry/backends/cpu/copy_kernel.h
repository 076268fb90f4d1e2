// The CPU copy kernels: copy_stub's (a built copy iterator) and copy_problem_stub's (a
// CopyProblem), both plan_copy then run_copy, so that what `ferry explain` prints is what runs.
#pragma once

#include "ferry/backends/cpu/copy_plan.h"
#include "ferry/iter/tensor_iterator.h"

namespace ferry::cpu {

// The CPU copy_stub kernel: copy_problem_from, then the plan's kernel.
void copy_kernel(TensorIterator& iter, bool non_blocking);

}  // namespace ferry::cpu
