// FERRY_CPU_TARGET's names (cpu_target.h), checked for this CPU and for the other kinds of CPU
// the project runs on, and forcing a target without touching Highway's own target masks.
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <string>
#include <vector>

#include "ferry/backends/cpu/cpu_target.h"
#include "ferry/backends/cpu/simd.h"
#include "ferry/core/error.h"

namespace ferry::cpu {
namespace {

const std::vector<std::string> kZen5 = {"AVX3", "AVX2", "SSE4", "EMU128"};
const std::vector<std::string> kZen3 = {"AVX2", "SSE4", "EMU128"};
const std::vector<std::string> kArm = {"NEON", "EMU128"};

// The message of the ferry::Error resolve_cpu_target raises ("" if it returns).
std::string failure(std::string_view name, const std::vector<std::string>& available) {
  try {
    resolve_cpu_target(name, available, "FERRY_CPU_TARGET");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(CpuTarget, FerryAndHighwayNames) {
  EXPECT_EQ(resolve_cpu_target("avx512", kZen5, "t"), "AVX3");
  EXPECT_EQ(resolve_cpu_target("avx2", kZen5, "t"), "AVX2");
  EXPECT_EQ(resolve_cpu_target("scalar", kZen5, "t"), "EMU128");
  EXPECT_EQ(resolve_cpu_target("AVX2", kZen3, "t"), "AVX2");
  EXPECT_EQ(resolve_cpu_target("Avx3", kZen5, "t"), "AVX3");
  EXPECT_EQ(resolve_cpu_target("neon", kArm, "t"), "NEON");
  EXPECT_EQ(resolve_cpu_target("scalar", {"SCALAR"}, "t"), "SCALAR");
  EXPECT_EQ(cpu_target_alias("AVX3"), "avx512");
  EXPECT_EQ(cpu_target_alias("SSE4"), "sse4");
  EXPECT_EQ(cpu_target_alias("EMU128"), "scalar");
  EXPECT_TRUE(is_cpu_target_name("AVX512"));
  EXPECT_FALSE(is_cpu_target_name("avx3"));  // Highway's name, not one of ferry's
}

TEST(CpuTarget, UnsupportedOrUnknownNamesListTheAcceptedOnes) {
  // AVX-512 on an AVX2-only CPU (Zen 3): the error names what this CPU accepts, and the value.
  const std::string zen3 = failure("avx512", kZen3);
  EXPECT_NE(zen3.find("FERRY_CPU_TARGET: expected one of avx2|sse4|scalar"), std::string::npos)
      << zen3;
  EXPECT_NE(zen3.find("\"avx512\""), std::string::npos) << zen3;
  EXPECT_FALSE(cpu_target_available("avx512", kZen3));
  EXPECT_TRUE(cpu_target_available("avx512", kZen5));
  EXPECT_NE(failure("avx2", kArm).find("expected one of neon|scalar"), std::string::npos);
  const std::string typo = failure("avx-512", kZen5);
  EXPECT_NE(typo.find("expected one of avx512|avx2|sse4|scalar"), std::string::npos) << typo;
  EXPECT_NE(failure("", kZen5).find("but got \"\""), std::string::npos);
}

TEST(CpuTarget, ForcingLeavesHighwaysMasksAlone) {
  // Highway's supported-target mask is process-global: flipping it (as SetSupportedTargetsForTest
  // does) would change the kernels other threads' copies dispatch to mid-copy.
  const int64_t before = hwy::SupportedTargets();
  for (const std::string& t : simd_targets()) {
    set_simd_target(t);
    EXPECT_EQ(simd_target(), t);
    EXPECT_EQ(hwy::SupportedTargets(), before) << t;
    (void)simd_targets();
    EXPECT_EQ(simd_target(), t);
  }
  set_simd_target("");
  EXPECT_EQ(simd_target(), default_cpu_target());
  EXPECT_EQ(hwy::SupportedTargets(), before);
}

}  // namespace
}  // namespace ferry::cpu
