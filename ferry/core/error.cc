// Raising ferry errors: appends the source location to the message.
#include "ferry/core/error.h"

namespace ferry::detail {

std::string with_location(std::string message, std::string_view file, int line) {
  if (auto pos = file.rfind("ferry/"); pos != std::string_view::npos) file.remove_prefix(pos);
  message += str_cat(" (", file, ":", line, ")");
  return message;
}

}  // namespace ferry::detail
