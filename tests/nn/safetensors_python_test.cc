// Interoperability with code ferry did not write: Debian's /usr/bin/python3 writes a safetensors
// file with nothing but struct and json (its own spacing, its own key order, no padding) that
// ferry loads, and reads a file ferry wrote, checking every value. Skipped with a message when
// /usr/bin/python3 is missing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "ferry/ferry.h"
#include "ferry/nn/safetensors.h"
#include "tests/nn/safetensors_test_util.h"
#include "tests/support/tensor_compare.h"

namespace ferry::testing {
namespace {

constexpr const char* kSafetensorsPython = "/usr/bin/python3";

// The values both sides agree on: element i of tensor k is (i * 7 + k) % 23 - 11, in its dtype
// (bool: the value is odd); bfloat16 is float32's upper half.
constexpr const char* kCommon = R"PY(
import json, struct, sys
SPECS = [  # name, code, struct format, itemsize, shape
    ("f64", "F64", "d", 8, [2, 3]), ("f32", "F32", "f", 4, [4]), ("f16", "F16", "e", 2, [3, 2]),
    ("bf16", "BF16", None, 2, [5]), ("i64", "I64", "q", 8, [2, 2]), ("i32", "I32", "i", 4, [3]),
    ("i16", "I16", "h", 2, [2]), ("i8", "I8", "b", 1, [6]), ("u8", "U8", "B", 1, [4]),
    ("flag", "BOOL", "?", 1, [7]), ("scalar", "F32", "f", 4, []), ("none", "F32", "f", 4, [0, 3]),
]
def numel(shape):
    n = 1
    for d in shape: n *= d
    return n
def value(i, k): return (i * 7 + k) % 23 - 11
def encode(k, code, fmt, shape):
    out = b""
    for i in range(numel(shape)):
        v = value(i, k)
        if code == "BF16": out += struct.pack("<f", float(v))[2:]
        elif code == "BOOL": out += struct.pack("<?", v % 2 != 0)
        elif code == "U8": out += struct.pack("<B", v % 256)
        elif fmt in "fde": out += struct.pack("<" + fmt, float(v))
        else: out += struct.pack("<" + fmt, v)
    return out
)PY";

constexpr const char* kWriter = R"PY(
header, data = {"__metadata__": {"writer": "python"}}, b""
for k, (name, code, fmt, size, shape) in enumerate(SPECS):
    blob = encode(k, code, fmt, shape)
    header[name] = {"data_offsets": [len(data), len(data) + len(blob)], "shape": shape, "dtype": code}
    data += blob
text = json.dumps(header).encode("utf-8")  # default separators, no padding
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + data)
)PY";

constexpr const char* kReader = R"PY(
with open(sys.argv[1], "rb") as f:
    raw = f.read()
n = struct.unpack("<Q", raw[:8])[0]
assert n % 8 == 0, "header not padded to 8"
header = json.loads(raw[8:8 + n].decode("utf-8"))
assert header.pop("__metadata__") == {"writer": "ferry"}
data = raw[8 + n:]
end = 0
for k, (name, code, fmt, size, shape) in enumerate(SPECS):
    t = header.pop(name)
    assert t["dtype"] == code and t["shape"] == shape, (name, t)
    b, e = t["data_offsets"]
    assert data[b:e] == encode(k, code, fmt, shape), name
    end = max(end, e)
assert not header and end == len(data)
print("python read ok")
)PY";

int run_python(const std::string& script_body, const std::string& file) {
  const std::string script = scratch_path("script.py");
  write_file(script, std::string(kCommon) + script_body);
  const std::string command = std::string(kSafetensorsPython) + " " + script + " " + file;
  return std::system(command.c_str());
}

struct Spec {
  const char* name;
  ScalarType dtype;
  std::vector<int64_t> shape;
};
const std::vector<Spec> kSpecs = {
    {"f64", kFloat64, {2, 3}}, {"f32", kFloat32, {4}},   {"f16", kFloat16, {3, 2}},
    {"bf16", kBFloat16, {5}},  {"i64", kInt64, {2, 2}},  {"i32", kInt32, {3}},
    {"i16", kInt16, {2}},      {"i8", kInt8, {6}},       {"u8", kUInt8, {4}},
    {"flag", kBool, {7}},      {"scalar", kFloat32, {}}, {"none", kFloat32, {0, 3}},
};

// The values of tensor k, as Python computes them (Python's % is never negative).
std::vector<double> expected_values(int k, const Spec& spec) {
  int64_t n = 1;
  for (int64_t d : spec.shape) n *= d;
  std::vector<double> out;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = (i * 7 + k) % 23 - 11;
    if (spec.dtype == kBool) {
      out.push_back(v % 2 != 0 ? 1 : 0);
    } else if (spec.dtype == kUInt8) {
      out.push_back(static_cast<double>((v % 256 + 256) % 256));
    } else {
      out.push_back(static_cast<double>(v));
    }
  }
  return out;
}

class SafetensorsPythonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::access(kSafetensorsPython, X_OK) != 0) {
      GTEST_SKIP() << kSafetensorsPython
                   << " is missing: the Python interoperability tests need Debian's "
                      "python3 (apt-get install python3)";
    }
  }
};

TEST_F(SafetensorsPythonTest, LoadsAFilePythonWrote) {
  const std::string path = scratch_path("from_python.safetensors");
  ASSERT_EQ(run_python(kWriter, path), 0);
  for (const safetensors::LoadOptions& o :
       {safetensors::LoadOptions{},
        safetensors::LoadOptions{.host_memory = safetensors::HostMemory::kPinned},
        safetensors::LoadOptions{.device = Device("sim:0")}}) {
    const safetensors::LoadedTensors loaded = safetensors::load(path, o);
    EXPECT_EQ(loaded.metadata.at("writer"), "python");
    ASSERT_EQ(loaded.size(), kSpecs.size());
    for (size_t k = 0; k < kSpecs.size(); ++k) {
      const Spec& spec = kSpecs[k];
      SCOPED_TRACE(spec.name);
      const Tensor& t = loaded[spec.name];
      EXPECT_EQ(t.dtype(), spec.dtype);
      EXPECT_EQ(t.sizes(), IntArrayRef(spec.shape));
      EXPECT_EQ(values_of(t), expected_values(static_cast<int>(k), spec));
    }
  }
}

TEST_F(SafetensorsPythonTest, PythonReadsAFileFerryWrote) {
  TensorDict tensors;
  for (size_t k = 0; k < kSpecs.size(); ++k) {
    const Spec& spec = kSpecs[k];
    const std::vector<double> v = expected_values(static_cast<int>(k), spec);
    Tensor t = empty(spec.shape, kFloat64);
    if (!v.empty()) std::memcpy(t.data_ptr(), v.data(), v.size() * sizeof(double));
    tensors.insert(spec.name, t.to(spec.dtype));
  }
  const std::string path = scratch_path("from_ferry.safetensors");
  safetensors::save(path, tensors, {{"writer", "ferry"}});
  EXPECT_EQ(run_python(kReader, path), 0) << "see the Python assertion above";
}

}  // namespace
}  // namespace ferry::testing
