// Helpers for the dispatcher tests: small tensors on any device type (device tensors get host
// memory labelled with the device: the dispatcher only looks at the label), a per-thread log
// that kernels append to, and D(), the dispatcher.
#pragma once

#include <cstdlib>
#include <string>
#include <vector>

#include "ferry/core/storage.h"
#include "ferry/core/tensor.h"
#include "ferry/dispatch/dispatcher.h"

namespace ferry::testing {

// The dispatcher every test registers into.
inline Dispatcher& D() { return Dispatcher::singleton(); }

inline Tensor tensor_on(Device device, bool requires_grad = false) {
  constexpr size_t kBytes = 4 * sizeof(float);
  void* p = std::calloc(1, kBytes);
  Storage storage(DataPtr(
                      p, p, [](void* c) { std::free(c); }, device),
                  kBytes);
  Tensor t = make_tensor(std::move(storage), kFloat, {4}, {1});
  t.impl()->set_requires_grad(requires_grad);
  return t;
}

// What kernels did, in order; cleared by each test.
inline std::vector<std::string>& kernel_log() {
  thread_local std::vector<std::string> log;
  return log;
}

}  // namespace ferry::testing
