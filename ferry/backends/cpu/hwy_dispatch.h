// FERRY_DISPATCH(Func): calls the variant of a HWY_EXPORT'ed kernel for the SIMD target ferry
// chose (cpu_target.h: the best this CPU supports, or the one FERRY_CPU_TARGET or set_simd_target
// names). Like HWY_DYNAMIC_DISPATCH, but indexed by ferry's own choice rather than by Highway's
// process-global chosen-target mask, which ferry never writes: other threads' copies, and other
// Highway users in the process, are unaffected by a forced target. Internal to the kernel sources.
#pragma once

#include <hwy/highway.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ferry::cpu::detail {

// The index into every HWY_EXPORT table of the chosen target; 0 until chosen (entry 0 is
// Highway's own chooser, never called through FERRY_DISPATCH).
extern std::atomic<size_t> g_dispatch_index;
// Chooses the target on first use (reads FERRY_CPU_TARGET; raises ferry::Error on a name this
// CPU does not support) and returns its index.
size_t choose_dispatch_index();

inline size_t dispatch_index() {
  const size_t index = g_dispatch_index.load(std::memory_order_relaxed);
  return HWY_LIKELY(index != 0) ? index : choose_dispatch_index();
}

// The table index of Highway target bit `target` (HWY_AVX2, HWY_EMU128, ...), for the targets
// this translation unit compiles: the same arithmetic as hwy::ChosenTarget::GetIndex.
constexpr size_t dispatch_index_of(int64_t target) {
  const int64_t mask = (HWY_CHOSEN_TARGET_SHIFT(target) | HWY_CHOSEN_TARGET_MASK_SCALAR) &
                       HWY_CHOSEN_TARGET_MASK_TARGETS;
  return static_cast<size_t>(__builtin_ctzll(static_cast<unsigned long long>(mask)));
}

}  // namespace ferry::cpu::detail

// One compiled target: Highway's single-entry tables, called directly.
#if HWY_IDE || ((HWY_TARGETS & (HWY_TARGETS - 1)) == 0)
#define FERRY_DISPATCH(FUNC_NAME) HWY_STATIC_DISPATCH(FUNC_NAME)
#else
#define FERRY_DISPATCH(FUNC_NAME) \
  (*(HWY_DISPATCH_TABLE(FUNC_NAME)[::ferry::cpu::detail::dispatch_index()]))
#endif
