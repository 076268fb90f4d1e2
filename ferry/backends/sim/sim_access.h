// How the sim's workers touch memory: memcpy/memset, copies from the CPU engine's streaming
// threshold up with its streaming copy (as its dense copies), except in ThreadSanitizer builds when
// the config hides device memory from TSan (SimConfig::tsan_sees_device_memory = false). Then
// the device-memory side of an access is ignored and the host side is reported explicitly, so a
// test may race on device memory on purpose while host-memory races are still caught.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "ferry/backends/cpu/copy_kernels.h"
#include "ferry/backends/cpu/copy_tuning.h"

#if defined(__SANITIZE_THREAD__)
#define FERRY_SIM_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define FERRY_SIM_TSAN 1
#endif
#endif

#ifdef FERRY_SIM_TSAN
extern "C" {
void AnnotateIgnoreReadsBegin(const char* file, int line);
void AnnotateIgnoreReadsEnd(const char* file, int line);
void AnnotateIgnoreWritesBegin(const char* file, int line);
void AnnotateIgnoreWritesEnd(const char* file, int line);
void AnnotateHappensBefore(const char* file, int line, const volatile void* addr);
void AnnotateHappensAfter(const char* file, int line, const volatile void* addr);
// GCC knows these as built-ins taking a signed size; the declarations must match that.
#if defined(__clang__)
void __tsan_read_range(void* addr, unsigned long size);   // NOLINT
void __tsan_write_range(void* addr, unsigned long size);  // NOLINT
#else
void __tsan_read_range(void* addr, long size);   // NOLINT
void __tsan_write_range(void* addr, long size);  // NOLINT
#endif
}
#endif

namespace ferry::sim::detail {

// Which operands of a copy are device memory.
inline constexpr uint8_t kDstIsDevice = 1;
inline constexpr uint8_t kSrcIsDevice = 2;

inline void sim_memcpy(void* dst, const void* src, size_t nbytes, uint8_t device_sides,
                       bool hide_device) {
#ifdef FERRY_SIM_TSAN
  if (hide_device) {
    AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
    AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
    std::memcpy(dst, src, nbytes);
    AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
    AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
    if ((device_sides & kDstIsDevice) == 0)
      __tsan_write_range(dst, static_cast<long>(nbytes));  // NOLINT
    if ((device_sides & kSrcIsDevice) == 0)
      __tsan_read_range(const_cast<void*>(src), static_cast<long>(nbytes));  // NOLINT
    return;
  }
#else
  (void)device_sides;
  (void)hide_device;
#endif
  // Large copies write with streaming stores, as the CPU engine's dense copies do (a DMA engine
  // does not read the destination's lines into a core's caches first either).
  if (static_cast<int64_t>(nbytes) >= cpu::tuning::stream_thresholds().sequential) {
    cpu::kernels::copy_bytes(dst, src, nbytes, /*stream=*/true);
    cpu::kernels::stream_fence();
    return;
  }
  std::memcpy(dst, src, nbytes);
}

inline void sim_memset(void* dst, int value, size_t nbytes, bool hide_device) {
#ifdef FERRY_SIM_TSAN
  if (hide_device) {
    AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
    std::memset(dst, value, nbytes);
    AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
    return;
  }
#else
  (void)hide_device;
#endif
  std::memset(dst, value, nbytes);
}

}  // namespace ferry::sim::detail
