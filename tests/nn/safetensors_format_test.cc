// The safetensors header: the writer's bytes against the reference writer's published test
// vectors, its order and padding, and every validation rule of the reader with the message that
// names the tensor and the offsets.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ferry/nn/safetensors_format.h"
#include "tests/nn/safetensors_test_util.h"
#include "tests/support/errors.h"

namespace ferry::testing {
namespace {

using safetensors::Header;
using safetensors::parse_file_image;
using safetensors::TensorInfo;
using ::testing::HasSubstr;

TensorInfo info(std::string name, ScalarType dtype, std::vector<int64_t> shape, uint64_t begin,
                uint64_t end) {
  TensorInfo t;
  t.name = std::move(name);
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.begin = begin;
  t.end = end;
  return t;
}

std::string error_parsing(const std::string& image) {
  return error_of([&] { (void)parse_file_image(image, "f.safetensors"); });
}

// The reference writer's test vector: one F32 [1, 2, 3] tensor "attn.0" gives a 64-byte header
// (no padding needed) and data right after it.
TEST(SafetensorsFormat, HeaderMatchesTheReferenceWriter) {
  const std::string h = safetensors::build_header({info("attn.0", kFloat32, {1, 2, 3}, 0, 24)}, {});
  const std::string text = R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})";
  ASSERT_EQ(text.size(), 64u);
  EXPECT_EQ(h, std::string("\x40\0\0\0\0\0\0\0", 8) + text);
}

TEST(SafetensorsFormat, HeaderIsPaddedWithSpacesToAMultipleOfEight) {
  // "attn0" is one byte shorter: 63 bytes, one space of padding (the reference's forced
  // alignment vector has shape [1, 1, 2, 3]: 65 bytes and 7 spaces).
  const std::string h =
      safetensors::build_header({info("attn0", kFloat32, {1, 1, 2, 3}, 0, 24)}, {});
  EXPECT_EQ(h.size() % 8, 0u);
  EXPECT_EQ(static_cast<unsigned char>(h[0]), 72u);
  EXPECT_EQ(h.substr(8 + 65), std::string(7, ' '));
  // No tensors: "{}" and six spaces; metadata only: 35 bytes and five spaces.
  EXPECT_EQ(safetensors::build_header({}, {}), std::string("\x08\0\0\0\0\0\0\0{}      ", 16));
  EXPECT_EQ(safetensors::build_header({}, {{"framework", "pt"}}),
            std::string("\x28\0\0\0\0\0\0\0", 8) + R"({"__metadata__":{"framework":"pt"}})" +
                std::string(5, ' '));
}

TEST(SafetensorsFormat, WriterOrderIsAlignmentThenName) {
  std::vector<TensorInfo> t = {info("b", kUInt8, {1}, 0, 0),    info("a", kFloat32, {1}, 0, 0),
                               info("z", kInt64, {1}, 0, 0),    info("c", kFloat32, {1}, 0, 0),
                               info("m", kBFloat16, {1}, 0, 0), info("y", kBool, {1}, 0, 0),
                               info("x", kFloat64, {1}, 0, 0),  info("h", kFloat16, {1}, 0, 0)};
  std::string names;
  for (size_t i : safetensors::writer_order(t)) names += t[i].name;
  EXPECT_EQ(names, "zxacmhby");
}

TEST(SafetensorsFormat, WriterRejectsReservedAndBadNames) {
  EXPECT_THAT(error_of([] {
                (void)safetensors::build_header({info("__metadata__", kFloat32, {0}, 0, 0)}, {});
              }),
              HasSubstr("may not be named \"__metadata__\""));
  EXPECT_THAT(
      error_of([] { (void)safetensors::build_header({info("a\xff", kFloat32, {0}, 0, 0)}, {}); }),
      HasSubstr("a tensor name is not valid UTF-8"));
  EXPECT_THAT(
      error_of([] { (void)safetensors::build_header({info("c", kComplex64, {0}, 0, 0)}, {}); }),
      HasSubstr("has no safetensors name"));
}

TEST(SafetensorsFormat, DtypeCodes) {
  for (auto [code, type] :
       std::vector<std::pair<std::string, ScalarType>>{{"F64", kFloat64},
                                                       {"F32", kFloat32},
                                                       {"F16", kFloat16},
                                                       {"BF16", kBFloat16},
                                                       {"F8_E4M3", kFloat8_e4m3fn},
                                                       {"F8_E5M2", kFloat8_e5m2},
                                                       {"I64", kInt64},
                                                       {"I32", kInt32},
                                                       {"I16", kInt16},
                                                       {"I8", kInt8},
                                                       {"U8", kUInt8},
                                                       {"BOOL", kBool}}) {
    EXPECT_EQ(safetensors::dtype_from_code(code), type) << code;
    EXPECT_EQ(safetensors::dtype_code(type), code);
  }
  EXPECT_FALSE(safetensors::dtype_from_code("U16").has_value());
  EXPECT_FALSE(safetensors::dtype_code(kComplex128).has_value());
}

TEST(SafetensorsFormat, ParsesSortsByOffsetAndKeepsMetadata) {
  const std::string header =
      R"({"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]},"__metadata__":{"k":"v"},)"
      R"("a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
      R"("e":{"dtype":"I64","shape":[0,3],"data_offsets":[12,12]},)"
      R"("s":{"dtype":"BF16","shape":[],"data_offsets":[12,14]}}  )";
  const Header h = parse_file_image(file_image(header, 14));
  ASSERT_EQ(h.tensors.size(), 4u);
  EXPECT_EQ(h.tensors[0].name, "a");
  EXPECT_EQ(h.tensors[1].name, "b");
  EXPECT_EQ(h.tensors[2].name, "e");  // zero-size, at the same offset as s: sorts first
  EXPECT_EQ(h.tensors[3].name, "s");
  EXPECT_TRUE(h.tensors[3].shape.empty());
  EXPECT_EQ(h.metadata.at("k"), "v");
  EXPECT_EQ(h.data_offset, 8 + header.size());
  EXPECT_EQ(h.data_bytes, 14u);
  EXPECT_EQ(h.find("b")->dtype, kFloat32);
  EXPECT_EQ(h.find("nope"), nullptr);
}

TEST(SafetensorsFormat, AcceptsEmptyHeadersAndNullMetadata) {
  EXPECT_TRUE(parse_file_image(file_image("{}")).tensors.empty());
  EXPECT_TRUE(parse_file_image(file_image(R"({"__metadata__":null})")).metadata.empty());
  EXPECT_TRUE(parse_file_image(file_image(R"({"__metadata__":{}})")).metadata.empty());
  // Unknown fields of a tensor are ignored, as the reference reader ignores them.
  EXPECT_EQ(parse_file_image(
                file_image(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":1}})", 1))
                .tensors.size(),
            1u);
}

TEST(SafetensorsFormat, RejectsBadLengths) {
  EXPECT_THAT(error_parsing("1234"), HasSubstr("is 4 bytes long, shorter than the 8-byte header"));
  std::string huge = file_image("{}");
  huge[3] = 0x10;  // 268 MB
  EXPECT_THAT(error_parsing(huge), HasSubstr("above the format's limit of 100000000 bytes"));
  std::string beyond = file_image("{}");
  beyond[0] = 100;
  EXPECT_THAT(error_parsing(beyond), HasSubstr("header of 100 bytes (bytes 8 to 108) does not fit "
                                               "inside the file of 10 bytes"));
  std::string max = file_image("{}");
  for (int i = 0; i < 8; ++i) max[static_cast<size_t>(i)] = '\xff';
  EXPECT_THAT(error_parsing(max), HasSubstr("above the format's limit"));
}

TEST(SafetensorsFormat, RejectsHeadersThatAreNotJsonObjects) {
  EXPECT_THAT(error_parsing(file_image("{\"a\xc3\x28\":1}")),
              HasSubstr("not valid UTF-8 (at byte 3 of the header, file offset 11)"));
  EXPECT_THAT(error_parsing(file_image("{\"\xed\xa0\x80\":1}")), HasSubstr("not valid UTF-8"));
  EXPECT_THAT(error_parsing(file_image("{\"a\":")), HasSubstr("not valid JSON"));
  EXPECT_THAT(error_parsing(file_image("{} x")), HasSubstr("not valid JSON"));
  EXPECT_THAT(error_parsing(file_image("")), HasSubstr("not valid JSON"));
  EXPECT_THAT(error_parsing(file_image("[]")), HasSubstr("to be a JSON object, but it is array"));
  EXPECT_THAT(error_parsing(file_image("[[[[[[[[[[]]]]]]]]]]")),
              HasSubstr("nests deeper than the format allows"));
  EXPECT_THAT(error_parsing(file_image(std::string(100000, '['))),
              HasSubstr("nests deeper than the format allows"));
  EXPECT_THAT(error_parsing(file_image(R"({"a":{"shape":[[1]]}})")), HasSubstr("nests deeper"));
}

TEST(SafetensorsFormat, RejectsDuplicateKeys) {
  const std::string t = R"({"dtype":"U8","shape":[1],"data_offsets":[0,1]})";
  EXPECT_THAT(error_parsing(file_image("{\"a\":" + t + ",\"a\":" + t + "}", 1)),
              HasSubstr("the key \"a\" appears twice (duplicate tensor name)"));
  EXPECT_THAT(error_parsing(file_image(
                  R"({"a":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1)),
              HasSubstr("the key \"dtype\" appears twice in one object"));
  EXPECT_THAT(error_parsing(file_image(R"({"__metadata__":{"k":"1","k":"2"}})")),
              HasSubstr("appears twice"));
}

TEST(SafetensorsFormat, RejectsBadMetadata) {
  EXPECT_THAT(error_parsing(file_image(R"({"__metadata__":{"k":1}})")),
              HasSubstr("__metadata__ entry \"k\" is number, but metadata values must be strings"));
  EXPECT_THAT(error_parsing(file_image(R"({"__metadata__":[]})")),
              HasSubstr("expected __metadata__ to be an object of strings, but it is array"));
}

TEST(SafetensorsFormat, RejectsBadTensorEntries) {
  const auto err = [](const std::string& entry, uint64_t data = 4) {
    return error_parsing(file_image("{\"w\":" + entry + "}", data));
  };
  EXPECT_THAT(err("3"), HasSubstr("tensor 'w': expected an object with dtype, shape and "
                                  "data_offsets, but got number"));
  EXPECT_THAT(err(R"({"shape":[1],"data_offsets":[0,4]})"),
              HasSubstr("tensor 'w': the entry has no \"dtype\""));
  EXPECT_THAT(err(R"({"dtype":"F32","data_offsets":[0,4]})"), HasSubstr("no \"shape\""));
  EXPECT_THAT(err(R"({"dtype":"F32","shape":[1]})"), HasSubstr("no \"data_offsets\""));
  EXPECT_THAT(err(R"({"dtype":7,"shape":[1],"data_offsets":[0,4]})"),
              HasSubstr("expected \"dtype\" to be a string"));
  EXPECT_THAT(err(R"({"dtype":"U16","shape":[2],"data_offsets":[0,4]})"),
              HasSubstr("tensor 'w': dtype \"U16\" is not supported (expected one of BOOL, U8"));
  EXPECT_THAT(err(R"({"dtype":"F32","shape":[-1],"data_offsets":[0,4]})"),
              HasSubstr("non-negative integers, but it holds a negative integer (-1)"));
  EXPECT_THAT(err(R"({"dtype":"F32","shape":[1.0],"data_offsets":[0,4]})"),
              HasSubstr("a floating-point number (1.0)"));
  EXPECT_THAT(err(R"({"dtype":"F32","shape":"1","data_offsets":[0,4]})"),
              HasSubstr("expected \"shape\" to be an array, but got string"));
  EXPECT_THAT(err(R"({"dtype":"F32","shape":[1],"data_offsets":[0,4,8]})"),
              HasSubstr("expected \"data_offsets\" to be [begin, end], but got [0,4,8]"));
  EXPECT_THAT(err(R"({"dtype":"F32","shape":[1],"data_offsets":[0,-4]})"),
              HasSubstr("to hold non-negative integers, but got [0,-4]"));
  EXPECT_THAT(err(R"({"dtype":"F32","shape":[1],"data_offsets":[4,0]})"),
              HasSubstr("tensor 'w': data_offsets [4, 0] end before they begin"));
  EXPECT_THAT(
      err(R"({"dtype":"F32","shape":[2],"data_offsets":[0,4]})"),
      HasSubstr("tensor 'w': shape [2] of F32 needs 8 bytes, but data_offsets [0, 4] hold 4"));
  EXPECT_THAT(err(R"({"dtype":"F32","shape":[9223372036854775808],"data_offsets":[0,4]})"),
              HasSubstr("overflows a 64-bit signed size"));
  EXPECT_THAT(err(R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]})"),
              HasSubstr("more elements than 64 bits can count"));
  EXPECT_THAT(err(R"({"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,4]})"),
              HasSubstr("needs more bytes than 64 bits can count"));
  EXPECT_THAT(err(R"({"dtype":"F32","shape":[1],"data_offsets":[0,18446744073709551616]})"),
              HasSubstr("non-negative integers"));
}

TEST(SafetensorsFormat, RejectsOffsetsThatDoNotTileTheBuffer) {
  const auto e = [](const std::string& a, const std::string& b, uint64_t data) {
    return error_parsing(file_image(
        R"({"a":{"dtype":"U8","shape":[)" + a + "}," + R"("b":{"dtype":"U8","shape":[)" + b + "}}",
        data));
  };
  EXPECT_THAT(e(R"(4],"data_offsets":[0,4])", R"(4],"data_offsets":[6,10])", 10),
              HasSubstr("tensor 'b': data_offsets [6, 10] begin at 6, but the previous tensor 'a' "
                        "([0, 4]) ends at 4 (a hole of 2 bytes)"));
  EXPECT_THAT(e(R"(4],"data_offsets":[0,4])", R"(4],"data_offsets":[2,6])", 6),
              HasSubstr("tensor 'b': data_offsets [2, 6] begin at 2, but the previous tensor 'a' "
                        "([0, 4]) ends at 4 (an overlap of 2 bytes)"));
  EXPECT_THAT(e(R"(4],"data_offsets":[2,6])", R"(4],"data_offsets":[6,10])", 10),
              HasSubstr("tensor 'a': data_offsets [2, 6] begin at 2, but the data buffer starts at "
                        "0 (a hole of 2 bytes)"));
  EXPECT_THAT(e(R"(4],"data_offsets":[0,4])", R"(4],"data_offsets":[4,8])", 9),
              HasSubstr("the tensors' data ends at byte 8 of the data buffer (tensor 'b', "
                        "data_offsets [4, 8]), but the buffer holds 9 bytes"));
  EXPECT_THAT(e(R"(4],"data_offsets":[0,4])", R"(4],"data_offsets":[4,8])", 7),
              HasSubstr("but the buffer holds 7 bytes"));
  EXPECT_THAT(
      error_parsing(file_image("{}", 3)),
      HasSubstr("the tensors' data ends at byte 0 of the data buffer, but the buffer holds 3"));
  // Two tensors on the same bytes (tied weights) are an overlap, as in the reference reader.
  EXPECT_THAT(e(R"(4],"data_offsets":[0,4])", R"(4],"data_offsets":[0,4])", 4),
              HasSubstr("an overlap of 4 bytes"));
}

}  // namespace
}  // namespace ferry::testing
