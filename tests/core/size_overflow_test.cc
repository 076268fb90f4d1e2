// Sizes whose element count, storage extent or byte size does not fit int64 raise ShapeError on
// every path that makes or views a tensor (instead of wrapping to a small storage, which let a
// 2^62-element float tensor sit on 0 bytes); plus the size(d)/stride(d) checks on 0-d tensors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "ferry/core/size_math.h"
#include "ferry/ferry.h"
#include "tests/support/errors.h"

namespace ferry {
namespace {

using ::testing::AllOf;
using testing::error_of;
using ::testing::HasSubstr;
using V = std::vector<int64_t>;

constexpr int64_t k2to62 = int64_t{1} << 62;
constexpr int64_t k2to40 = int64_t{1} << 40;
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr const char* kOverflow = "storage size calculation overflowed";

Tensor small(IntArrayRef sizes, ScalarType dtype = kFloat) { return zeros(sizes, dtype); }

TEST(SizeMath, CheckedHelpers) {
  EXPECT_EQ(checked_numel({}), 1);
  EXPECT_EQ(checked_numel({3, 4}), 12);
  // A zero wins even when the other sizes alone overflow.
  EXPECT_EQ(checked_numel({k2to62, k2to62, 0}), 0);
  EXPECT_THAT(
      error_of<ShapeError>([] {
        checked_numel({k2to62, 4}, "probe");
      }),
      AllOf(HasSubstr("probe: "), HasSubstr(kOverflow), HasSubstr("[4611686018427387904, 4]")));
  EXPECT_EQ(checked_storage_extent({2, 3}, {3, 1}), 6);
  EXPECT_EQ(checked_storage_extent({2, 0}, {kMax, kMax}), 0);
  EXPECT_EQ(checked_storage_extent({1}, {kMax}), 1);  // a size-1 dim never moves
  EXPECT_THAT(error_of<ShapeError>([] { checked_storage_extent({3}, {k2to62}); }),
              AllOf(HasSubstr(kOverflow), HasSubstr("[3]"), HasSubstr("[4611686018427387904]")));
  EXPECT_THAT(error_of<ShapeError>([] {
                checked_storage_extent({2, 2}, {kMax, 1});
              }),
              HasSubstr(kOverflow));
  EXPECT_EQ(checked_storage_nbytes({2, 3}, {3, 1}, 2, 4), 32);
  EXPECT_EQ(checked_storage_nbytes({0}, {1}, kMax, 16), 0);
  EXPECT_THAT(error_of<ShapeError>([] { checked_storage_nbytes({k2to62}, {1}, 0, 4); }),
              AllOf(HasSubstr(kOverflow), HasSubstr("4-byte elements")));
  EXPECT_THAT(error_of<ShapeError>([] { checked_storage_nbytes({2}, {1}, kMax - 1, 1); }),
              HasSubstr("storage offset 9223372036854775806"));
}

TEST(SizeOverflow, Empty) {
  // 2^62 float32 elements are 2^64 bytes: the byte count used to wrap to 0.
  EXPECT_THAT(error_of<ShapeError>([] { empty({k2to62}); }),
              AllOf(HasSubstr(kOverflow), HasSubstr("[4611686018427387904]")));
  EXPECT_THAT(error_of<ShapeError>([] { empty({k2to62, 4}, kUInt8); }), HasSubstr(kOverflow));
  // Empty, yet the dense strides of [0, 2^40, 2^40] would not fit.
  EXPECT_THAT(error_of<ShapeError>([] {
                empty({0, k2to40, k2to40});
              }),
              AllOf(HasSubstr(kOverflow), HasSubstr("[0, 1099511627776, 1099511627776]")));
  EXPECT_THAT(error_of<ShapeError>([] {
                empty({2, k2to62, 1, 2}, TensorOptions().memory_format(MemoryFormat::ChannelsLast));
              }),
              HasSubstr(kOverflow));
  // The slowest dimension never scales a stride: this one is fine and has no elements.
  Tensor e = empty({k2to62, k2to40, 0}, kUInt8);
  EXPECT_EQ(e.numel(), 0);
  EXPECT_EQ(e.strides().vec(), (V{k2to40, 1, 1}));
}

TEST(SizeOverflow, EmptyStrided) {
  EXPECT_THAT(error_of<ShapeError>([] { empty_strided({3}, {k2to62}); }),
              AllOf(HasSubstr("empty_strided"), HasSubstr(kOverflow)));
  // The extent fits, its byte size does not.
  EXPECT_THAT(error_of<ShapeError>([] {
                empty_strided({2, 2}, {k2to62, 1});
              }),
              AllOf(HasSubstr("empty_strided"), HasSubstr("4-byte elements")));
  EXPECT_THAT(error_of<ShapeError>([] { empty_strided({2}, {-1}); }),
              HasSubstr("expected non-negative strides"));
}

TEST(SizeOverflow, AsStridedAndMakeTensor) {
  Tensor a = small({4});
  // Used to wrap to 4 bytes and pass the bounds check of a 16-byte storage.
  EXPECT_THAT(error_of<ShapeError>([&] { a.as_strided({2}, {k2to62}); }), HasSubstr(kOverflow));
  EXPECT_THAT(error_of<ShapeError>([&] {
                a.as_strided({k2to62, 4}, {0, 0});
              }),
              AllOf(HasSubstr(kOverflow), HasSubstr("element count")));
  // A size-1 dimension's stride is never stepped, but its byte size must still fit.
  EXPECT_THAT(error_of<ShapeError>([&] { a.as_strided({1}, {k2to62}); }),
              AllOf(HasSubstr("strides whose byte size fits"), HasSubstr("[4611686018427387904]")));
  EXPECT_THAT(error_of<ShapeError>([&] { a.as_strided({1}, {1}, k2to62); }),
              AllOf(HasSubstr("storage offset"), HasSubstr("4611686018427387904")));
  EXPECT_THAT(error_of<ShapeError>([&] { a.as_strided({2}, {1}, kMax); }), HasSubstr(kOverflow));
  // Without a storage to bound it the layout is still checked.
  EXPECT_THAT(error_of<ShapeError>([] { make_tensor(Storage(), kFloat, {3}, {k2to62}); }),
              HasSubstr(kOverflow));
  EXPECT_EQ(a.as_strided({1}, {k2to40}).numel(), 1);
}

TEST(SizeOverflow, ViewAndReshape) {
  Tensor a = small({4});
  EXPECT_THAT(error_of<ShapeError>([&] {
                a.view({k2to62, 4});
              }),
              AllOf(HasSubstr("view"), HasSubstr("invalid for a tensor of 4 elements")));
  EXPECT_THAT(error_of<ShapeError>([&] {
                a.reshape({k2to62, 8, -1});
              }),
              AllOf(HasSubstr("reshape"), HasSubstr("overflows int64")));
  // An empty tensor takes any shape of 0 elements, even one whose other sizes overflow.
  Tensor e = small({0});
  EXPECT_EQ(e.view({k2to62, 4, -1}).sizes().vec(), (V{k2to62, 4, 0}));
  EXPECT_EQ(e.reshape({k2to40, k2to40, 0}).sizes().vec(), (V{k2to40, k2to40, 0}));
  EXPECT_THAT(error_of<ShapeError>([&] { e.view({0, k2to40, k2to40}); }), HasSubstr(kOverflow));
  // Merging dims whose product does not fit.
  Tensor wide = e.view({k2to40, k2to40, 0});
  EXPECT_THAT(error_of<ShapeError>([&] { wide.flatten(0, 1); }),
              AllOf(HasSubstr("flatten"), HasSubstr(kOverflow)));
  EXPECT_EQ(wide.flatten().sizes().vec(), (V{0}));
}

TEST(SizeOverflow, Expand) {
  Tensor one = small({1});
  EXPECT_THAT(error_of<ShapeError>([&] {
                one.expand({k2to62, 4});
              }),
              AllOf(HasSubstr(kOverflow), HasSubstr("[4611686018427387904, 4]")));
  // 2^62 float elements: the count fits, the dense byte size (nbytes, a clone) does not.
  EXPECT_THAT(error_of<ShapeError>([&] { one.expand({k2to62}); }),
              AllOf(HasSubstr("dense byte size"), HasSubstr("4 bytes")));
  Tensor bytes = small({1}, kUInt8).expand({k2to62});
  EXPECT_EQ(bytes.numel(), k2to62);
  EXPECT_EQ(bytes.nbytes(), static_cast<size_t>(k2to62));
  EXPECT_THAT(error_of<ShapeError>([&] {
                bytes.unsqueeze(0).expand({4, k2to62});
              }),
              HasSubstr(kOverflow));
}

TEST(SizeOverflow, FromBlob) {
  float data[4] = {};
  EXPECT_THAT(error_of<ShapeError>([&] { from_blob(data, {k2to62}); }),
              AllOf(HasSubstr("from_blob"), HasSubstr(kOverflow)));
  EXPECT_THAT(error_of<ShapeError>([&] { from_blob(data, {2}, {k2to62}); }),
              AllOf(HasSubstr("from_blob"), HasSubstr(kOverflow)));
  bool deleted = false;
  EXPECT_THROW(from_blob(data, {k2to62}, {1}, [&](void*) { deleted = true; }), ShapeError);
  EXPECT_FALSE(deleted);  // refused before taking ownership: the caller still owns the memory
}

TEST(SizeOverflow, SliceAndUnsqueezeNeverOverflow) {
  Tensor a = small({4, 10});
  // A step past the dimension keeps one element; (hi - lo + step - 1) used to overflow.
  Tensor s = a.slice(1, 0, std::nullopt, kMax);
  EXPECT_EQ(s.sizes().vec(), (V{4, 1}));
  EXPECT_EQ(s.strides().vec(), (V{10, 1}));
  EXPECT_EQ(a.slice(1, 3, std::nullopt, kMax).storage_offset(), 3);
  // An empty tensor's strides are not bounded by its storage: the size-1 dim gets stride 1 when
  // size * stride would overflow.
  Tensor e = small({0}).as_strided({3, 0}, {k2to62 / 4, 1});
  EXPECT_EQ(e.unsqueeze(0).strides().vec(), (V{1, k2to62 / 4, 1}));
  // The empty slice at the end of a dimension would start past int64.
  Tensor e8 = small({0}, kUInt8).as_strided({3, 0}, {k2to62 - 1, 1});
  EXPECT_THAT(error_of<ShapeError>([&] { e8.slice(0, 3); }),
              AllOf(HasSubstr("slice: storage offset calculation overflowed"),
                    HasSubstr("3 * 4611686018427387903")));
  EXPECT_EQ(e8.slice(0, 2).storage_offset(), 2 * (k2to62 - 1));
}

TEST(SizeOverflow, CpuAllocatorRoundingDoesNotWrap) {
  const size_t huge = std::numeric_limits<size_t>::max() - 5;
  EXPECT_THAT(error_of<OutOfMemoryError>([&] { cpu_allocator()->allocate(huge, Device("cpu")); }),
              AllOf(HasSubstr("18446744073709551610 bytes"), HasSubstr("2 MiB pages")));
}

TEST(ZeroDim, SizeAndStrideRaise) {
  Tensor s = small({});
  EXPECT_THAT(error_of<IndexError>([&] { s.size(0); }),
              AllOf(HasSubstr("size: expected a tensor with at least 1 dimension"),
                    HasSubstr("but got a 0-d tensor (dim 0)")));
  EXPECT_THAT(error_of<IndexError>([&] { s.stride(-1); }),
              AllOf(HasSubstr("stride: expected a tensor with at least 1 dimension"),
                    HasSubstr("(dim -1)")));
  EXPECT_EQ(small({5}).size(0), 5);
  EXPECT_EQ(small({5}).stride(-1), 1);
}

}  // namespace
}  // namespace ferry
