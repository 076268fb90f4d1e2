// The default generator.
#include "ferry/core/generator.h"

namespace ferry {

Generator& default_generator() {
  static Generator generator;
  return generator;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace ferry
