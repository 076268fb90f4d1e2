// FERRY_CPU_TARGET=avx512|avx2|sse4|neon|scalar: the names that choose the SIMD target of the CPU
// copy kernels (simd.h) for comparisons and tests, and how they map to Highway's targets. Pure
// functions of the names, so that tests can check the rules for CPUs other than their own.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ferry::cpu {

// ferry's name for a Highway target: "AVX3" -> "avx512", "AVX2" -> "avx2", "SSE4" -> "sse4",
// "NEON" -> "neon", "EMU128" and "SCALAR" (Highway's portable, one-lane-at-a-time baselines) ->
// "scalar"; any other in lower case.
std::string cpu_target_alias(std::string_view highway_name);

// The target of `available` (Highway's names, best first, as simd_targets() returns them) that
// `requested` names, by ferry's name or Highway's (any case). Raises ferry::Error naming the
// accepted values (ferry's names of `available`) and `requested` otherwise: an unknown name,
// or one this CPU does not support (avx512 on an AVX2-only CPU). `origin` starts the message
// ("FERRY_CPU_TARGET", "set_simd_target").
std::string resolve_cpu_target(std::string_view requested,
                               const std::vector<std::string>& available, std::string_view origin);

// Whether `requested` is one of ferry's names (avx512, avx2, sse4, neon, scalar; any case), on
// any CPU.
bool is_cpu_target_name(std::string_view requested);

// Whether `requested` names one of `available` (resolve_cpu_target would not raise).
bool cpu_target_available(std::string_view requested, const std::vector<std::string>& available);

// The target the kernels use unless set_simd_target says otherwise: FERRY_CPU_TARGET's (read
// once), or the best when it is unset or empty. Raises as resolve_cpu_target on a bad value.
std::string default_cpu_target();

}  // namespace ferry::cpu
