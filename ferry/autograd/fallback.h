// The autograd keys' fallback (see fallback.cc) and the kernel of operators that are not
// differentiable: they run below autograd and their results never require grad.
#pragma once

#include <string_view>

#include "ferry/dispatch/kernel_function.h"
#include "ferry/dispatch/library.h"

namespace ferry::autograd {

void non_differentiable_kernel(const OperatorHandle& op, DispatchKeySet ks, Stack* stack);
// Registers non_differentiable_kernel for `op` at every autograd key.
void register_non_differentiable(Library& m, std::string_view op);

}  // namespace ferry::autograd
