// ferry's error types and the one check macro that raises them.
// Every error is a ferry::Error; the message says what was expected and what was
// given, and carries the source location of the failed check.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace ferry {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Sizes or ranks that don't fit together (view, broadcast, copy_).
class ShapeError : public Error {
 public:
  using Error::Error;
};
// A dtype that is not allowed where it was given.
class DTypeError : public Error {
 public:
  using Error::Error;
};
// A device that is unknown, unavailable or mismatched, and errors from a backend runtime.
class DeviceError : public Error {
 public:
  using Error::Error;
};
// A dimension or element index outside its valid range.
class IndexError : public Error {
 public:
  using Error::Error;
};
// An allocation that could not be satisfied.
class OutOfMemoryError : public Error {
 public:
  using Error::Error;
};
// A combination that ferry does not support (yet), e.g. an operator with no kernel.
class NotImplementedError : public Error {
 public:
  using Error::Error;
};

namespace detail {

template <typename... Args>
std::string str_cat(const Args&... args) {
  if constexpr (sizeof...(Args) == 0) {
    return {};
  } else {
    std::ostringstream out;
    (out << ... << args);
    return out.str();
  }
}

// Appends " (file:line)" with the path shortened to start at ferry/.
std::string with_location(std::string message, std::string_view file, int line);

// Cold and out of line so that a check costs one predictable branch at the call site.
template <typename E>
[[noreturn, gnu::cold, gnu::noinline]] void throw_error(std::string_view file, int line,
                                                        std::string message) {
  static_assert(std::is_base_of_v<Error, E>, "ferry raises only ferry::Error subclasses");
  throw E(with_location(std::move(message), file, line));
}

}  // namespace detail
}  // namespace ferry

// FERRY_CHECK_AS(ErrorType, cond, message parts...) raises ErrorType when cond is false;
// FERRY_CHECK(cond, ...) raises ferry::Error. Message parts are streamed with operator<<.
#define FERRY_CHECK_AS(ErrorType, cond, ...)                                          \
  do {                                                                                \
    if (__builtin_expect(!(cond), 0)) {                                               \
      ::ferry::detail::throw_error<ErrorType>(__FILE__, __LINE__,                     \
                                              ::ferry::detail::str_cat(__VA_ARGS__)); \
    }                                                                                 \
  } while (false)

#define FERRY_CHECK(cond, ...) FERRY_CHECK_AS(::ferry::Error, cond, __VA_ARGS__)

// Unconditional raise, for switch defaults and the like.
#define FERRY_FAIL_AS(ErrorType, ...) FERRY_CHECK_AS(ErrorType, false, __VA_ARGS__)
