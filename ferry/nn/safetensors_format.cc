// The safetensors header: validation (the reference reader's rules, with messages that name the
// file, the tensor and the offsets) and the writer's header. nlohmann-json parses the JSON; a
// parser callback refuses nesting deeper than the format's three levels (so a hostile header of
// brackets cannot build a deep tree) and duplicate keys (nlohmann would keep the last silently).
#include "ferry/nn/safetensors_format.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <limits>
#include <numeric>
#include <sstream>
#include <unordered_set>

#include "ferry/core/error.h"

namespace ferry::safetensors {
namespace {

using json = nlohmann::json;

struct DtypeEntry {
  std::string_view name;
  ScalarType type;
  int writer_rank;  // the reference's Dtype order (increasing alignment)
};

// The reference enum also has U16 (6), U32 (10) and U64 (14), which ferry has no dtype for.
constexpr std::array<DtypeEntry, 12> kDtypes = {{
    {"BOOL", kBool, 0},
    {"U8", kUInt8, 1},
    {"I8", kInt8, 2},
    {"F8_E5M2", kFloat8_e5m2, 3},
    {"F8_E4M3", kFloat8_e4m3fn, 4},
    {"I16", kInt16, 5},
    {"F16", kFloat16, 7},
    {"BF16", kBFloat16, 8},
    {"I32", kInt32, 9},
    {"F32", kFloat32, 11},
    {"F64", kFloat64, 12},
    {"I64", kInt64, 13},
}};

const DtypeEntry* entry_of(ScalarType t) {
  for (const DtypeEntry& e : kDtypes) {
    if (e.type == t) return &e;
  }
  return nullptr;
}

std::string supported_names() {
  std::string out;
  for (const DtypeEntry& e : kDtypes) out += (out.empty() ? "" : ", ") + std::string(e.name);
  return out;
}

// The first invalid position of `s` as UTF-8 (Rust's str::from_utf8 rules: no overlong forms, no
// surrogates, nothing above U+10FFFF), or npos.
size_t invalid_utf8_at(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return i;
    }
    if (i + len > n || p[i + 1] < lo || p[i + 1] > hi) return i;
    for (size_t k = 2; k < len; ++k) {
      if (p[i + k] < 0x80 || p[i + k] > 0xBF) return i;
    }
    i += len;
  }
  return std::string_view::npos;
}

// Thrown by the parser callback; turned into a ferry::Error with the file's name.
struct HeaderShapeError {
  std::string message;
};

const char* json_kind(const json& j) {
  if (j.is_number_float()) return "a floating-point number";
  if (j.is_number_integer() && !j.is_number_unsigned()) return "a negative integer";
  return j.type_name();
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << ']';
  return out.str();
}

std::string offsets_str(const TensorInfo& t) {
  return "[" + std::to_string(t.begin) + ", " + std::to_string(t.end) + "]";
}

TensorInfo parse_tensor(const std::string& name, const json& v, std::string_view source) {
  const auto fail = [&](const auto&... parts) {
    FERRY_FAIL_AS(Error, "safetensors: ", source, ": tensor '", name, "': ", parts...);
  };
  if (!v.is_object())
    fail("expected an object with dtype, shape and data_offsets, but got ", json_kind(v));
  TensorInfo t;
  t.name = name;
  const auto dtype = v.find("dtype");
  if (dtype == v.end()) fail("the entry has no \"dtype\"");
  if (!dtype->is_string()) fail("expected \"dtype\" to be a string, but got ", json_kind(*dtype));
  const std::string& dname = dtype->get_ref<const std::string&>();
  const std::optional<ScalarType> type = dtype_from_code(dname);
  if (!type)
    fail("dtype ", json(dname).dump(), " is not supported (expected one of ", supported_names(),
         ")");
  t.dtype = *type;

  const auto shape = v.find("shape");
  if (shape == v.end()) fail("the entry has no \"shape\"");
  if (!shape->is_array()) fail("expected \"shape\" to be an array, but got ", json_kind(*shape));
  for (const json& d : *shape) {
    if (!d.is_number_unsigned()) {
      fail("expected \"shape\" to hold non-negative integers, but it holds ", json_kind(d), " (",
           d.dump(), ")");
    }
    const uint64_t size = d.get<uint64_t>();
    if (size > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      fail("shape ", shape->dump(), ": size ", size, " overflows a 64-bit signed size");
    }
    t.shape.push_back(static_cast<int64_t>(size));
  }

  const auto offsets = v.find("data_offsets");
  if (offsets == v.end()) fail("the entry has no \"data_offsets\"");
  if (!offsets->is_array() || offsets->size() != 2) {
    fail("expected \"data_offsets\" to be [begin, end], but got ", offsets->dump());
  }
  for (const json& o : *offsets) {
    if (!o.is_number_unsigned()) {
      fail("expected \"data_offsets\" to hold non-negative integers, but got ", offsets->dump());
    }
  }
  t.begin = (*offsets)[0].get<uint64_t>();
  t.end = (*offsets)[1].get<uint64_t>();
  if (t.end < t.begin) {
    fail("data_offsets ", offsets_str(t), " end before they begin");
  }
  // numel * itemsize, each step checked.
  uint64_t numel = 1;
  for (int64_t d : t.shape) {
    if (d != 0 && numel > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(d)) {
      fail("shape ", shape_str(t.shape), " has more elements than 64 bits can count");
    }
    numel *= static_cast<uint64_t>(d);
  }
  const uint64_t itemsize = element_size(t.dtype);
  if (numel > std::numeric_limits<uint64_t>::max() / itemsize ||
      numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    fail("shape ", shape_str(t.shape), " of ", dname, " needs more bytes than 64 bits can count");
  }
  if (numel * itemsize != t.nbytes()) {
    fail("shape ", shape_str(t.shape), " of ", dname, " needs ", numel * itemsize,
         " bytes, but data_offsets ", offsets_str(t), " hold ", t.nbytes());
  }
  return t;
}

}  // namespace

const TensorInfo* Header::find(std::string_view name) const {
  for (const TensorInfo& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::optional<std::string_view> dtype_code(ScalarType dtype) {
  const DtypeEntry* e = entry_of(dtype);
  if (e == nullptr) return std::nullopt;
  return e->name;
}

std::optional<ScalarType> dtype_from_code(std::string_view name) {
  for (const DtypeEntry& e : kDtypes) {
    if (e.name == name) return e.type;
  }
  return std::nullopt;
}

uint64_t header_length(const unsigned char first_eight[8], uint64_t file_size,
                       std::string_view source) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | first_eight[i];
  FERRY_CHECK(file_size >= 8, "safetensors: ", source, ": the file is ", file_size,
              " bytes long, shorter than the 8-byte header length that starts a safetensors file");
  FERRY_CHECK(n <= kMaxHeaderBytes, "safetensors: ", source, ": the header length is ", n,
              " bytes, above the format's limit of ", kMaxHeaderBytes, " bytes");
  FERRY_CHECK(n <= file_size - 8, "safetensors: ", source, ": the header of ", n,
              " bytes (bytes 8 to ", 8 + n, ") does not fit inside the file of ", file_size,
              " bytes");
  return n;
}

Header parse_header(std::string_view text, uint64_t file_size, std::string_view source) {
  Header header;
  header.header_bytes = text.size();
  header.data_offset = 8 + text.size();
  FERRY_CHECK(header.data_offset <= file_size, "safetensors: ", source, ": the header of ",
              text.size(), " bytes does not fit inside the file of ", file_size, " bytes");
  header.data_bytes = file_size - header.data_offset;
  const size_t bad = invalid_utf8_at(text);
  FERRY_CHECK(bad == std::string_view::npos, "safetensors: ", source,
              ": the header is not valid UTF-8 (at byte ", bad, " of the header, file offset ",
              8 + bad, ")");

  // The root object's keys in the header's order, and one key set per open object.
  std::vector<std::string> order;
  std::vector<std::unordered_set<std::string>> open_objects;
  const auto callback = [&](int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        // The format nests three levels: the root, a tensor (or __metadata__), its arrays.
        if (depth > 2) throw HeaderShapeError{"the header nests deeper than the format allows"};
        if (event == json::parse_event_t::object_start) open_objects.emplace_back();
        break;
      case json::parse_event_t::object_end:
        open_objects.pop_back();
        break;
      case json::parse_event_t::key: {
        std::string key = parsed.get<std::string>();
        if (!open_objects.back().insert(key).second) {
          throw HeaderShapeError{"the key " + parsed.dump() + " appears twice" +
                                 (depth == 1 ? "" : " in one object") +
                                 (depth == 1 ? " (duplicate tensor name)" : "")};
        }
        if (depth == 1) order.push_back(std::move(key));
        break;
      }
      default:
        break;
    }
    return true;
  };
  json root;
  try {
    root = json::parse(text.begin(), text.end(), callback);
  } catch (const HeaderShapeError& e) {
    FERRY_FAIL_AS(Error, "safetensors: ", source, ": ", e.message);
  } catch (const json::exception& e) {
    FERRY_FAIL_AS(Error, "safetensors: ", source, ": the header is not valid JSON: ", e.what());
  }
  FERRY_CHECK(root.is_object(), "safetensors: ", source,
              ": expected the header to be a JSON object, but it is ", json_kind(root));

  for (const std::string& name : order) {
    const json& v = root.at(name);
    if (name == "__metadata__") {
      if (v.is_null()) continue;
      FERRY_CHECK(v.is_object(), "safetensors: ", source,
                  ": expected __metadata__ to be an object of strings, but it is ", json_kind(v));
      for (const auto& [key, value] : v.items()) {
        FERRY_CHECK(value.is_string(), "safetensors: ", source, ": __metadata__ entry ",
                    json(key).dump(), " is ", json_kind(value),
                    ", but metadata values must be "
                    "strings");
        header.metadata.emplace(key, value.get<std::string>());
      }
      continue;
    }
    header.tensors.push_back(parse_tensor(name, v, source));
  }

  // Offsets must tile the data buffer: sorted by (begin, end), each begins where the previous
  // ends, the first at 0 and the last at the buffer's end.
  std::stable_sort(header.tensors.begin(), header.tensors.end(),
                   [](const TensorInfo& a, const TensorInfo& b) {
                     return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
                   });
  uint64_t at = 0;
  const TensorInfo* previous = nullptr;
  for (const TensorInfo& t : header.tensors) {
    if (t.begin != at) {
      const std::string after = previous == nullptr ? std::string("the data buffer starts at 0")
                                                    : "the previous tensor '" + previous->name +
                                                          "' (" + offsets_str(*previous) +
                                                          ") ends at " + std::to_string(at);
      FERRY_FAIL_AS(Error, "safetensors: ", source, ": tensor '", t.name, "': data_offsets ",
                    offsets_str(t), " begin at ", t.begin, ", but ", after, " (",
                    t.begin > at ? "a hole of " + std::to_string(t.begin - at) + " bytes"
                                 : "an overlap of " + std::to_string(at - t.begin) + " bytes",
                    ")");
    }
    at = t.end;
    previous = &t;
  }
  FERRY_CHECK(at == header.data_bytes, "safetensors: ", source, ": the tensors' data ends at byte ",
              at, " of the data buffer",
              previous != nullptr ? " (tensor '" + previous->name + "', data_offsets " +
                                        offsets_str(*previous) + ")"
                                  : std::string(),
              ", but the buffer holds ", header.data_bytes, " bytes (a file of ", file_size,
              " bytes = 8 + a header of ", header.header_bytes, " + the buffer)");
  return header;
}

Header parse_file_image(std::string_view file, std::string_view source) {
  FERRY_CHECK(file.size() >= 8, "safetensors: ", source, ": the file is ", file.size(),
              " bytes long, shorter than the 8-byte header length that starts a safetensors file");
  const uint64_t n =
      header_length(reinterpret_cast<const unsigned char*>(file.data()), file.size(), source);
  return parse_header(file.substr(8, n), file.size(), source);
}

std::vector<size_t> writer_order(const std::vector<TensorInfo>& tensors) {
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  const auto rank = [&](size_t i) {
    const DtypeEntry* e = entry_of(tensors[i].dtype);
    return e == nullptr ? -1 : e->writer_rank;
  };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (rank(a) != rank(b)) return rank(a) > rank(b);
    return tensors[a].name < tensors[b].name;
  });
  return order;
}

std::string build_header(const std::vector<TensorInfo>& tensors, const Metadata& metadata) {
  const auto quoted = [](const std::string& s, const char* what) {
    try {
      return json(s).dump(-1, ' ', false, json::error_handler_t::strict);
    } catch (const json::exception&) {
      FERRY_FAIL_AS(Error, "safetensors: save: ", what, " is not valid UTF-8");
    }
  };
  std::string text = "{";
  if (!metadata.empty()) {
    text += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [key, value] : metadata) {
      text += (first ? "" : ",") + quoted(key, "a metadata key") + ":" +
              quoted(value, "a metadata value");
      first = false;
    }
    text += "}";
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorInfo& t = tensors[i];
    FERRY_CHECK(t.name != "__metadata__",
                "safetensors: save: a tensor may not be named \"__metadata__\" (the format "
                "reserves that key for the metadata)");
    const std::optional<std::string_view> dname = dtype_code(t.dtype);
    FERRY_CHECK_AS(DTypeError, dname.has_value(), "safetensors: save: tensor '", t.name,
                   "': dtype ", t.dtype, " has no safetensors name (expected one of ",
                   supported_names(), ")");
    if (text.size() > 1) text += ",";
    text += quoted(t.name, "a tensor name");
    text += ":{\"dtype\":\"" + std::string(*dname) + "\",\"shape\":[";
    for (size_t d = 0; d < t.shape.size(); ++d) {
      text += (d ? "," : "") + std::to_string(t.shape[d]);
    }
    text += "],\"data_offsets\":[" + std::to_string(t.begin) + "," + std::to_string(t.end) + "]}";
  }
  text += "}";
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) {
    out[static_cast<size_t>(i)] = static_cast<char>(n & 0xFF);
    n >>= 8;
  }
  return out + text;
}

}  // namespace ferry::safetensors
