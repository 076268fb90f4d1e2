// The default generator, and the per-thread override of it (thread_generator.h).
#include "ferry/core/generator.h"
#include "ferry/core/thread_generator.h"

namespace ferry {

namespace {
thread_local Generator* tls_generator = nullptr;
}  // namespace

Generator& default_generator() {
  static Generator generator;
  return tls_generator != nullptr ? *tls_generator : generator;
}

ThreadGeneratorGuard::ThreadGeneratorGuard(Generator* generator) : previous_(tls_generator) {
  tls_generator = generator;
}

ThreadGeneratorGuard::~ThreadGeneratorGuard() { tls_generator = previous_; }

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace ferry
