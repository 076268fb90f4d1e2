// SIMD target control (simd.h) on top of Highway's run-time dispatch: forcing a target uses
// Highway's supported-targets mask, which every HWY_DYNAMIC_DISPATCH in the kernels consults.
#include "ferry/backends/cpu/simd.h"

#include "ferry/backends/cpu/hwy_targets.h"  // first: the same target set as the kernels

#include <hwy/targets.h>

#include <atomic>
#include <cstdint>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "ferry/backends/cpu/copy_kernels.h"
#include "ferry/core/error.h"

namespace ferry::cpu {
namespace {

// Compiled and supported targets, best (lowest bit) first, ignoring any forced restriction.
std::vector<int64_t> available_targets() {
  std::vector<int64_t> out;
  for (int64_t bits = hwy::SupportedTargets() & HWY_TARGETS; bits != 0; bits &= bits - 1) {
    out.push_back(bits & -bits);
  }
  return out;
}

int64_t& forced_target() {
  static int64_t forced = 0;
  return forced;
}

// CPUID leaf 7, sub-leaf 1: EAX bit 5 is AVX512_BF16.
bool cpu_has_avx512_bf16() {
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) != 0 && (eax >> 5 & 1u) != 0;
#else
  return false;
#endif
}

std::atomic<bool>& native_bf16_flag() {
  static std::atomic<bool> flag{cpu_has_avx512_bf16()};
  return flag;
}

}  // namespace

const char* simd_target() { return kernels::dispatch_target_name(); }

std::vector<std::string> simd_targets() {
  const int64_t saved = forced_target();
  if (saved != 0) hwy::SetSupportedTargetsForTest(0);
  std::vector<std::string> names;
  for (int64_t t : available_targets()) names.emplace_back(hwy::TargetName(t));
  if (saved != 0) hwy::SetSupportedTargetsForTest(saved);
  kernels::forget_dispatch_target();
  return names;
}

void set_simd_target(std::string_view name) {
  hwy::SetSupportedTargetsForTest(0);
  forced_target() = 0;
  kernels::forget_dispatch_target();
  if (name.empty()) return;
  const std::vector<int64_t> targets = available_targets();
  for (int64_t t : targets) {
    if (name == hwy::TargetName(t)) {
      // This target and every worse one (higher bits) that the CPU supports.
      const int64_t allowed = hwy::SupportedTargets() & ~(t - 1);
      hwy::SetSupportedTargetsForTest(allowed);
      forced_target() = allowed;
      kernels::forget_dispatch_target();
      return;
    }
  }
  std::string known;
  for (int64_t t : targets) known += std::string(known.empty() ? "" : ", ") + hwy::TargetName(t);
  FERRY_FAIL_AS(Error, "set_simd_target: expected one of ", known,
                " (or \"\" for the best), but got \"", std::string(name), "\"");
}

bool native_bf16() { return native_bf16_flag().load(std::memory_order_relaxed); }

void set_native_bf16(bool allow) {
  native_bf16_flag().store(allow && cpu_has_avx512_bf16(), std::memory_order_relaxed);
}

}  // namespace ferry::cpu
