// The test-only safetensors reader (see safetensors.h): nlohmann-json for the header, one
// memcpy per tensor into a fresh contiguous CPU tensor.
#include "tests/support/safetensors.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "ferry/ops/factories.h"

namespace ferry::testing {
namespace {

using nlohmann::json;

// The safetensors dtype names ferry has a dtype for.
ScalarType dtype_of(const std::string& name, const std::string& where) {
  static const std::map<std::string, ScalarType> kNames = {{"F64", kFloat64},
                                                           {"F32", kFloat32},
                                                           {"F16", kFloat16},
                                                           {"BF16", kBFloat16},
                                                           {"I64", kInt64},
                                                           {"I32", kInt32},
                                                           {"I16", kInt16},
                                                           {"I8", kInt8},
                                                           {"U8", kUInt8},
                                                           {"BOOL", kBool},
                                                           {"F8_E4M3", kFloat8_e4m3fn},
                                                           {"F8_E5M2", kFloat8_e5m2}};
  const auto it = kNames.find(name);
  FERRY_CHECK_AS(DTypeError, it != kNames.end(), where,
                 ": expected a safetensors dtype (F64, F32, ",
                 "F16, BF16, I64, I32, I16, I8, U8, BOOL, F8_E4M3, F8_E5M2), but got '", name, "'");
  return it->second;
}

uint64_t read_le64(std::string_view bytes) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i)
    v = (v << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
  return v;
}

Tensor read_tensor(const std::string& name, const json& entry, std::string_view data,
                   const std::string& what) {
  const std::string where = what + ": tensor '" + name + "'";
  FERRY_CHECK(entry.is_object() && entry.contains("dtype") && entry.contains("shape") &&
                  entry.contains("data_offsets"),
              where, ": expected an object with dtype, shape and data_offsets, but got ",
              entry.dump());
  FERRY_CHECK(entry["dtype"].is_string(), where, ": dtype is not a string");
  const ScalarType dtype = dtype_of(entry["dtype"].get<std::string>(), where);
  const json& shape = entry["shape"];
  FERRY_CHECK(shape.is_array(), where, ": shape is not an array");
  std::vector<int64_t> sizes;
  uint64_t numel = 1;
  for (const json& s : shape) {
    FERRY_CHECK(s.is_number_unsigned() && s.get<uint64_t>() < (uint64_t{1} << 40), where,
                ": expected non-negative sizes, but the shape is ", shape.dump());
    sizes.push_back(s.get<int64_t>());
    numel *= s.get<uint64_t>();
  }
  const json& offsets = entry["data_offsets"];
  FERRY_CHECK(offsets.is_array() && offsets.size() == 2 && offsets[0].is_number_unsigned() &&
                  offsets[1].is_number_unsigned(),
              where, ": expected data_offsets [begin, end], but got ", offsets.dump());
  const uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
  FERRY_CHECK(begin <= end && end <= data.size(), where, ": data_offsets [", begin, ", ", end,
              "] lie outside the ", data.size(), " data bytes");
  Tensor t = empty(sizes, TensorOptions(dtype));
  FERRY_CHECK(end - begin == t.nbytes(), where, ": ", end - begin, " data bytes for ", numel,
              " elements of ", dtype, " (", t.nbytes(), " bytes expected)");
  if (t.nbytes() > 0) std::memcpy(t.data_ptr(), data.data() + begin, t.nbytes());
  return t;
}

}  // namespace

Tensor SafetensorsFile::get(const std::string& name) const {
  const auto it = tensors.find(name);
  return it == tensors.end() ? Tensor() : it->second;
}

SafetensorsFile parse_safetensors(std::string_view bytes, const std::string& what) {
  FERRY_CHECK(bytes.size() >= 8, what, ": expected at least the 8-byte header length, but it has ",
              bytes.size(), " bytes");
  const uint64_t header_size = read_le64(bytes);
  FERRY_CHECK(header_size <= bytes.size() - 8, what, ": the header claims ", header_size,
              " bytes, but only ", bytes.size() - 8, " follow the length");
  const json header =
      json::parse(bytes.substr(8, header_size), nullptr, /*allow_exceptions=*/false);
  FERRY_CHECK(header.is_object(), what, ": the header is not a JSON object");
  const std::string_view data = bytes.substr(8 + header_size);
  SafetensorsFile file;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      FERRY_CHECK(entry.is_object(), what, ": __metadata__ is not an object");
      for (const auto& [key, value] : entry.items()) {
        FERRY_CHECK(value.is_string(), what, ": __metadata__ value '", key, "' is not a string");
        file.metadata.emplace(key, value.get<std::string>());
      }
      continue;
    }
    file.tensors.emplace(name, read_tensor(name, entry, data, what));
  }
  return file;
}

SafetensorsFile read_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  FERRY_CHECK(in.good(), "cannot open '", path, "'");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse_safetensors(bytes, path);
}

}  // namespace ferry::testing
