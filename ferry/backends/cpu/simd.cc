// SIMD target control (simd.h, cpu_target.h) for the copy kernels' own dispatch (hwy_dispatch.h):
// the chosen target is ferry's state, an index into Highway's HWY_EXPORT tables. Highway's
// process-global target masks are only read, once (hwy::SupportedTargets).
#include "ferry/backends/cpu/simd.h"

#include <hwy/targets.h>

#include <atomic>
#include <cctype>
#include <cstdint>
#include <cstdlib>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "ferry/backends/cpu/copy_kernels.h"
#include "ferry/backends/cpu/cpu_target.h"
#include "ferry/backends/cpu/hwy_dispatch.h"
#include "ferry/core/error.h"

namespace ferry::cpu {
namespace detail {
std::atomic<size_t> g_dispatch_index{0};
}  // namespace detail

namespace {

// Compiled (HWY_TARGETS) and supported targets, best (lowest bit) first. SupportedTargets()
// detects the CPU's features on every call, and records them in Highway's chosen-target mask as
// its first HWY_DYNAMIC_DISPATCH would: called once, before any kernel runs.
const std::vector<int64_t>& available_bits() {
  static const std::vector<int64_t> bits = [] {
    std::vector<int64_t> out;
    for (int64_t b = hwy::SupportedTargets() & HWY_TARGETS; b != 0; b &= b - 1) {
      out.push_back(b & -b);
    }
    return out;
  }();
  return bits;
}

const std::vector<std::string>& available_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (int64_t b : available_bits()) out.emplace_back(hwy::TargetName(b));
    return out;
  }();
  return names;
}

// Makes the available target named `name` (Highway's name) the one the kernels dispatch to.
void select(const std::string& name) {
  for (int64_t b : available_bits()) {
    if (name == hwy::TargetName(b)) {
      detail::g_dispatch_index.store(detail::dispatch_index_of(b), std::memory_order_relaxed);
      return;
    }
  }
  FERRY_FAIL_AS(Error, "SIMD target: expected one of the available targets, but got ", name);
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
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

namespace detail {

size_t choose_dispatch_index() {
  select(default_cpu_target());
  return g_dispatch_index.load(std::memory_order_relaxed);
}

}  // namespace detail

std::string cpu_target_alias(std::string_view highway_name) {
  if (highway_name == "AVX3") return "avx512";
  if (highway_name == "EMU128" || highway_name == "SCALAR") return "scalar";
  return lower(highway_name);
}

bool is_cpu_target_name(std::string_view requested) {
  const std::string want = lower(requested);
  return want == "avx512" || want == "avx2" || want == "sse4" || want == "neon" || want == "scalar";
}

bool cpu_target_available(std::string_view requested, const std::vector<std::string>& available) {
  const std::string want = lower(requested);
  for (const std::string& name : available) {
    if (want == cpu_target_alias(name) || want == lower(name)) return true;
  }
  return false;
}

std::string resolve_cpu_target(std::string_view requested,
                               const std::vector<std::string>& available, std::string_view origin) {
  const std::string want = lower(requested);
  std::string accepted;
  for (const std::string& name : available) {
    if (want == cpu_target_alias(name) || want == lower(name)) return name;
    accepted += (accepted.empty() ? "" : "|") + cpu_target_alias(name);
  }
  FERRY_FAIL_AS(Error, origin, ": expected one of ", accepted,
                " (the SIMD targets this CPU supports), but got \"", std::string(requested), "\"");
}

std::string default_cpu_target() {
  static const std::string target = [] {
    const char* env = std::getenv("FERRY_CPU_TARGET");
    if (env == nullptr || *env == '\0') return available_names().front();
    return resolve_cpu_target(env, available_names(), "FERRY_CPU_TARGET");
  }();
  return target;
}

const char* simd_target() { return kernels::dispatch_target_name(); }

std::vector<std::string> simd_targets() { return available_names(); }

void set_simd_target(std::string_view name) {
  select(name.empty() ? default_cpu_target()
                      : resolve_cpu_target(name, available_names(), "set_simd_target"));
}

bool native_bf16() { return native_bf16_flag().load(std::memory_order_relaxed); }

void set_native_bf16(bool allow) {
  native_bf16_flag().store(allow && cpu_has_avx512_bf16(), std::memory_order_relaxed);
}

}  // namespace ferry::cpu
