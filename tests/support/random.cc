// Seeds for randomized tests; see random.h.
#include "tests/support/random.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <functional>

namespace ferry::testing {

uint64_t base_seed() {
  static const uint64_t seed = [] {
    if (const char* env = std::getenv("FERRY_TEST_SEED"); env != nullptr && *env != '\0') {
      return static_cast<uint64_t>(std::strtoull(env, nullptr, 10));
    }
    return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count() %
                                 1000000007ULL);
  }();
  return seed;
}

uint64_t test_seed() {
  std::string name = "global";
  if (const auto* info = ::testing::UnitTest::GetInstance()->current_test_info()) {
    name = std::string(info->test_suite_name()) + "." + info->name();
  }
  // splitmix64 of base ^ hash(name): different tests get independent streams.
  uint64_t z = base_seed() ^ std::hash<std::string>{}(name);
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::mt19937_64 test_rng() { return std::mt19937_64(test_seed()); }

std::string seed_trace() {
  return "test seed " + std::to_string(test_seed()) +
         " (replay the run with FERRY_TEST_SEED=" + std::to_string(base_seed()) + ")";
}

}  // namespace ferry::testing
