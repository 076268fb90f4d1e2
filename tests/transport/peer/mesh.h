// What rank `from` sends rank `to` in the transport tests' mesh exchange: distinct per pair and
// checkable by the receiver (shared by multiprocess_test.cc and transport_peer.cc).
#pragma once

#include "ferry/ferry.h"

namespace ferry::transport::testing {

inline Tensor mesh_tensor(int64_t from, int64_t to) {
  return arange(1000 + 37 * from + to, kFloat64).mul(double(from + 1)).add(double(to));
}

}  // namespace ferry::transport::testing
