// The reference CPU copy: plain strided loops, one element at a time through convert_value,
// then conj and neg. It is the yardstick the tuned kernels (plan_copy/run_copy) are tested
// against, so it stays simple enough to be checked by reading.
#pragma once

#include "ferry/backends/cpu/copy_plan.h"

namespace ferry::cpu {

// Runs `problem` serially: for every index, dst = copy_element(src) (ferry/iter/copy_element.h:
// convert_value, then conj, then neg).
// Accepts any problem whose arrays have equal lengths (the coalescing invariants are not
// needed); a 0-d problem copies one element.
void run_copy_reference(const CopyProblem& problem);

}  // namespace ferry::cpu
