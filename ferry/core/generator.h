// Generator: the seedable source of random numbers for rand/randn/randint.
// Counter-based: element i of a draw is a hash of (seed, offset + i), so a draw is
// reproducible from the seed alone and can be filled in parallel; each draw advances the
// offset by the number of values it consumed. Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>

namespace ferry {

class Generator {
 public:
  explicit Generator(uint64_t seed = kDefaultSeed) : seed_(seed) {}

  void manual_seed(uint64_t seed) {
    seed_.store(seed, std::memory_order_relaxed);
    offset_.store(0, std::memory_order_relaxed);
  }
  uint64_t seed() const { return seed_.load(std::memory_order_relaxed); }
  uint64_t offset() const { return offset_.load(std::memory_order_relaxed); }

  // Reserves `count` consecutive counters and returns the first.
  uint64_t reserve(uint64_t count) { return offset_.fetch_add(count, std::memory_order_relaxed); }

  // The i-th 64-bit random value of the stream for `seed` (a stateless mix, splitmix64-style).
  static uint64_t bits(uint64_t seed, uint64_t i) {
    uint64_t z = seed * 0xd1b54a32d192ed03ULL + (i + 1) * 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 53 random bits.
  static double uniform(uint64_t seed, uint64_t i) {
    return static_cast<double>(bits(seed, i) >> 11) * 0x1.0p-53;
  }

  static constexpr uint64_t kDefaultSeed = 67280421310721ULL;

 private:
  std::atomic<uint64_t> seed_;
  std::atomic<uint64_t> offset_{0};
};

// The process-wide generator used when a factory is given none.
Generator& default_generator();
// Reseeds the default generator (torch.manual_seed).
void manual_seed(uint64_t seed);

}  // namespace ferry
