// Writing JSON text by hand (the benchmarks' --json, traces): a string as a quoted JSON string.
// Guarantees: the result is a valid JSON string literal for any input bytes; quotes, backslashes
// and control characters are escaped, other bytes (UTF-8 included) pass through unchanged.
#pragma once

#include <string>
#include <string_view>

namespace ferry {

// `text` between double quotes, escaped: json_quoted("a\"b") is "\"a\\\"b\"".
std::string json_quoted(std::string_view text);

}  // namespace ferry
