// error_of<E>(fn): runs fn and returns the message of the E it throws, or "(no <E>)" when it
// throws nothing, so tests can match error messages with EXPECT_THAT(..., HasSubstr(...)).
#pragma once

#include <string>

#include "ferry/core/error.h"

namespace ferry::testing {

template <typename E = ::ferry::Error, typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  }
  return "(no exception of the expected type)";
}

}  // namespace ferry::testing
