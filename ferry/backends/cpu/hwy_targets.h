// The SIMD targets ferry's CPU kernels are compiled for. Include first in every Highway source
// of ferry/backends/cpu, before any hwy header, so all of them build the same target set.
#pragma once

// SSSE3 brings nothing the kernels use over the emulated baseline that SSE4 does not, and each
// target costs a full compile of every kernel source: AVX3 (AVX-512), AVX2, SSE4 and EMU128 stay.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS HWY_SSSE3
#endif
