// A per-thread override of the default generator (ferry/core/generator.h): while a
// ThreadGeneratorGuard lives on a thread, default_generator() called on that thread returns the
// guard's generator, so a pipeline stage and its checkpoint recompute draw the same random values
// (dropout) whatever other threads draw meanwhile. Guards nest; each restores the previous one.
// Not copyable; belongs to one scope on one thread.
#pragma once

#include "ferry/core/generator.h"

namespace ferry {

class ThreadGeneratorGuard {
 public:
  explicit ThreadGeneratorGuard(Generator* generator);
  ThreadGeneratorGuard(const ThreadGeneratorGuard&) = delete;
  ThreadGeneratorGuard& operator=(const ThreadGeneratorGuard&) = delete;
  ~ThreadGeneratorGuard();

 private:
  Generator* previous_;
};

}  // namespace ferry
