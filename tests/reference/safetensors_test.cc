// The test-only safetensors reader (tests/support/safetensors.h) on hand-made files: values and
// dtypes read back exactly, metadata kept, and every malformed header rejected with a message.
#include "tests/support/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "tests/support/errors.h"
#include "tests/support/tensor_compare.h"

namespace ferry::testing {
namespace {

using ::testing::HasSubstr;

// length (little-endian) + header + data
std::string file_of(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i)
    out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

template <typename T>
std::string bytes_of(std::initializer_list<T> values) {
  std::string out(values.size() * sizeof(T), '\0');
  std::memcpy(out.data(), values.begin(), out.size());
  return out;
}

TEST(Safetensors, ReadsTensorsAndMetadata) {
  const std::string data = bytes_of<float>({1, 2, 3, 4, 5, 6}) + bytes_of<int64_t>({-7, 9}) +
                           bytes_of<uint16_t>({0x3f80, 0xc000}) + std::string("\x01\x00\x01", 3);
  const std::string header = R"({"__metadata__":{"case":"{\"op\": \"add\"}"},)"
                             R"("a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
                             R"("b":{"dtype":"I64","shape":[2],"data_offsets":[24,40]},)"
                             R"("c":{"dtype":"BF16","shape":[2],"data_offsets":[40,44]},)"
                             R"("d":{"dtype":"BOOL","shape":[3],"data_offsets":[44,47]},)"
                             R"("e":{"dtype":"F64","shape":[0,4],"data_offsets":[47,47]}})";
  const SafetensorsFile f = parse_safetensors(file_of(header, data));
  EXPECT_EQ(f.metadata.at("case"), R"({"op": "add"})");
  ASSERT_TRUE(f.get("a").defined());
  EXPECT_EQ(f.get("a").sizes().vec(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(values_of(f.get("a")), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(f.get("b").dtype(), kInt64);
  EXPECT_EQ(values_of(f.get("b")), (std::vector<double>{-7, 9}));
  EXPECT_EQ(f.get("c").dtype(), kBFloat16);
  EXPECT_EQ(values_of(f.get("c")), (std::vector<double>{1, -2}));
  EXPECT_EQ(values_of(f.get("d")), (std::vector<double>{1, 0, 1}));
  EXPECT_EQ(f.get("e").numel(), 0);
  EXPECT_FALSE(f.get("missing").defined());
}

TEST(Safetensors, RejectsMalformedFiles) {
  EXPECT_THAT(error_of([] { parse_safetensors("abc"); }), HasSubstr("8-byte header length"));
  std::string too_long = file_of("{}", "");
  too_long[0] = 100;
  EXPECT_THAT(error_of([&] { parse_safetensors(too_long); }), HasSubstr("the header claims 100"));
  EXPECT_THAT(error_of([] { parse_safetensors(file_of("[1, 2]", "")); }),
              HasSubstr("not a JSON object"));
  EXPECT_THAT(error_of([] { parse_safetensors(file_of("{not json", "")); }),
              HasSubstr("not a JSON object"));
  EXPECT_THAT(
      error_of([] {
        parse_safetensors(file_of(R"({"a":{"dtype":"Q8","shape":[1],"data_offsets":[0,1]}})", "x"));
      }),
      HasSubstr("'Q8'"));
  EXPECT_THAT(
      error_of([] {
        parse_safetensors(file_of(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})",
                                  std::string(4, '\0')));
      }),
      HasSubstr("8 bytes expected"));
  EXPECT_THAT(
      error_of([] {
        parse_safetensors(file_of(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})",
                                  std::string(4, '\0')));
      }),
      HasSubstr("outside the 4 data bytes"));
  EXPECT_THAT(
      error_of([] {
        parse_safetensors(file_of(R"({"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}})", ""));
      }),
      HasSubstr("non-negative sizes"));
  EXPECT_THAT(error_of([] { parse_safetensors(file_of(R"({"__metadata__":{"n":3}})", "")); }),
              HasSubstr("'n' is not a string"));
  EXPECT_THAT(error_of([] { read_safetensors("/nonexistent/ferry.safetensors"); }),
              HasSubstr("cannot open"));
}

}  // namespace
}  // namespace ferry::testing
