// Seeds for randomized tests. Every run draws one base seed (from FERRY_TEST_SEED when set, else
// from the clock), prints it from main(), and each test derives its own seed from it and its name,
// so a failure replays exactly with FERRY_TEST_SEED.
#pragma once

#include <cstdint>
#include <random>
#include <string>

namespace ferry::testing {

// The run's base seed.
uint64_t base_seed();

// A seed for the current test: base_seed() mixed with the running test's full name.
uint64_t test_seed();

// A generator seeded with test_seed(); add SCOPED_TRACE(seed_trace()) in tests that use it.
std::mt19937_64 test_rng();

// "seed <n> (FERRY_TEST_SEED=<base>)" for failure messages.
std::string seed_trace();

}  // namespace ferry::testing
