// The main() of every ferry test executable: prints the random seed the run uses, so that a
// failing randomized test can be replayed with FERRY_TEST_SEED=<seed>.
#include <gtest/gtest.h>

#include <cstdio>

#include "tests/support/random.h"

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  std::printf("ferry tests: seed %llu (replay with FERRY_TEST_SEED=%llu)\n",
              static_cast<unsigned long long>(ferry::testing::base_seed()),
              static_cast<unsigned long long>(ferry::testing::base_seed()));
  return RUN_ALL_TESTS();
}
