// SIMD target control for ferry's CPU copy kernels: which instruction sets are compiled in and
// supported here, which one the kernels dispatch to, and forcing a lower one (for tests and
// benchmarks of the AVX2 and portable paths on an AVX-512 machine). No Highway types here.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ferry::cpu {

// The target the kernels dispatch to now: "AVX3" (AVX-512), "AVX2", "SSE4", "EMU128", ...
const char* simd_target();

// The targets compiled into ferry that this CPU supports, best first.
std::vector<std::string> simd_targets();

// Dispatches to `name`, one of simd_targets(); "" restores the best. Raises ferry::Error for
// any other name. Not safe while copies run on other threads.
void set_simd_target(std::string_view name);

}  // namespace ferry::cpu
