// The safetensors file format, without any I/O: the dtype names, the reader's validation of a
// header and the writer's header. A file is an 8-byte little-endian header length N, N bytes of
// UTF-8 JSON, then the data buffer. parse_header accepts exactly what the reference reader
// (huggingface/safetensors) accepts, except that it also rejects duplicate keys, and raises a
// ferry::Error naming the file, the tensor and the offsets for everything else.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/core/scalar_type.h"

namespace ferry::safetensors {

using Metadata = std::map<std::string, std::string>;

// The reference reader's limit on N.
inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;

// One tensor of a file. `begin`/`end` are byte offsets into the data buffer (the file from byte
// 8 + N on); end - begin == numel * itemsize.
struct TensorInfo {
  std::string name;
  ScalarType dtype = kFloat32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t nbytes() const { return end - begin; }
};

struct Header {
  std::vector<TensorInfo> tensors;  // in data-offset order (ties: the header's order)
  Metadata metadata;                // __metadata__ (empty when absent or null)
  uint64_t header_bytes = 0;        // N
  uint64_t data_offset = 0;         // 8 + N: where the data buffer starts in the file
  uint64_t data_bytes = 0;          // the data buffer's length: file size - 8 - N

  // The tensor named `name`, or null.
  const TensorInfo* find(std::string_view name) const;
};

// "F32", "BF16", ... for the supported dtypes; nullopt for the others (complex).
std::optional<std::string_view> dtype_code(ScalarType dtype);
// The ScalarType of a safetensors dtype name; nullopt for names ferry does not support (U16, U32,
// U64, F4, ...) and for unknown names.
std::optional<ScalarType> dtype_from_code(std::string_view name);

// N from the file's first 8 bytes (little-endian), checked against kMaxHeaderBytes and against
// the file's size. `source` names the file in messages.
uint64_t header_length(const unsigned char first_eight[8], uint64_t file_size,
                       std::string_view source);

// Parses and validates the header text (the N bytes after the length) of a file of `file_size`
// bytes: UTF-8, a JSON object nesting no deeper than the format does, no duplicate keys,
// __metadata__ absent, null or an object of strings, every tensor with a supported dtype, a
// shape of non-negative integers and data_offsets [begin, end] with end - begin == numel *
// itemsize (overflow checked), offsets that tile the data buffer exactly.
Header parse_header(std::string_view header_text, uint64_t file_size, std::string_view source);

// Both steps over a whole file image in memory (for tests and the fuzzer).
Header parse_file_image(std::string_view file, std::string_view source = "<memory>");

// What the writer puts in front of the data: for tensors already in the writer's order (see
// writer_order), the 8-byte length and the JSON header padded with spaces to a multiple of 8
// bytes, so that the data buffer starts 8-byte aligned. `tensors[i].begin/end` must tile the
// buffer. Raises ferry::Error for a name that is not valid UTF-8 or is "__metadata__".
std::string build_header(const std::vector<TensorInfo>& tensors, const Metadata& metadata);

// The reference writer's order: by dtype alignment, largest first (I64, F64, F32, I32, BF16,
// F16, I16, F8_E4M3, F8_E5M2, I8, U8, BOOL), then by name (bytewise). Returns indices into
// `tensors`.
std::vector<size_t> writer_order(const std::vector<TensorInfo>& tensors);

}  // namespace ferry::safetensors
