// A small, test-only reader of safetensors files (8-byte little-endian header length, a JSON
// header of {name: {dtype, shape, data_offsets}} plus string-only __metadata__, then raw data),
// for files that other programs (PyTorch, in tests/reference) write. Every offset, size and
// dtype is checked against the file; a malformed file raises ferry::Error naming what is wrong.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "ferry/core/tensor.h"

namespace ferry::testing {

struct SafetensorsFile {
  std::map<std::string, std::string> metadata;  // __metadata__ (strings only)
  std::map<std::string, Tensor> tensors;        // contiguous CPU tensors in the file's dtypes

  // The tensor called `name`, or an undefined Tensor when there is none.
  Tensor get(const std::string& name) const;
};

// Parses the bytes of a file; `what` names it in error messages.
SafetensorsFile parse_safetensors(std::string_view bytes, const std::string& what = "buffer");
SafetensorsFile read_safetensors(const std::string& path);

}  // namespace ferry::testing
