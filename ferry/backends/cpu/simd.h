// SIMD target control for ferry's CPU copy kernels: which instruction sets are compiled in and
// supported here, which one the kernels dispatch to, and forcing a lower one (for tests and
// benchmarks of the AVX2 and portable paths on an AVX-512 machine), and whether the CPU's own
// bfloat16 conversion is used. No Highway types here.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ferry::cpu {

// The target the kernels dispatch to now: "AVX3" (AVX-512), "AVX2", "SSE4", "EMU128", ...
const char* simd_target();

// The targets compiled into ferry that this CPU supports, best first.
std::vector<std::string> simd_targets();

// Dispatches to `name`, one of simd_targets(); "" restores the default (FERRY_CPU_TARGET's choice,
// else the best). Raises ferry::Error for any other name. Not safe while copies run on other
// threads.
void set_simd_target(std::string_view name);

// Whether float32 -> bfloat16 transposes on the AVX3 target convert with the CPU's own
// instruction (AVX512_BF16, as on Zen 4 and later, Cooper Lake and Sapphire Rapids) rather than
// the portable rounding: by default, when the CPU has it. The stored bits are the same either
// way (docs/kernels.md, "Conversions in the tiles"); set_native_bf16(false) turns it off so that
// tests and benchmarks can compare the two, set_native_bf16(true) turns it back on where the CPU
// has it. Not safe while copies run on other threads.
bool native_bf16();
void set_native_bf16(bool allow);

}  // namespace ferry::cpu
