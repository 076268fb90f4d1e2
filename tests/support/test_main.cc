// The main() of every ferry test executable: prints the random seed the run uses, so that a
// failing randomized test can be replayed with FERRY_TEST_SEED=<seed>. Under FERRY_CPU_TARGET
// (the per-target runs of the CPU tests), prints the SIMD target, and skips the whole run (exit
// code 77, ctest's SKIP_RETURN_CODE) when this CPU, or a build with fewer SIMD targets
// (FERRY_SIMD_TARGETS=STATIC), does not support a target ferry knows.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/backends/cpu/cpu_target.h"
#include "ferry/backends/cpu/simd.h"
#include "tests/support/random.h"

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  if (const char* target = std::getenv("FERRY_CPU_TARGET"); target != nullptr && *target != 0) {
    const std::vector<std::string> available = ferry::cpu::simd_targets();
    if (ferry::cpu::is_cpu_target_name(target) &&
        !ferry::cpu::cpu_target_available(target, available)) {
      std::string names;
      for (const std::string& t : available) names += " " + ferry::cpu::cpu_target_alias(t);
      std::printf(
          "ferry tests: skipped: FERRY_CPU_TARGET=%s, which this CPU (or this build's SIMD "
          "targets) does not support (available:%s)\n",
          target, names.c_str());
      return 77;
    }
    // An unknown name raises here, failing the run.
    std::printf("ferry tests: FERRY_CPU_TARGET=%s, SIMD target %s\n", target,
                ferry::cpu::simd_target());
  }
  std::printf("ferry tests: seed %llu (replay with FERRY_TEST_SEED=%llu)\n",
              static_cast<unsigned long long>(ferry::testing::base_seed()),
              static_cast<unsigned long long>(ferry::testing::base_seed()));
  return RUN_ALL_TESTS();
}
