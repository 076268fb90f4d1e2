// Tensor printing against hand-written strings in PyTorch's repr: ranks 0 to 3, views through
// strides, every dtype, the dtype/size/requires_grad suffixes, integer mode, scientific
// notation, nan/inf, complex values, the lazy conj/neg bits, line wrapping and summarization.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "ferry/core/memory_format.h"
#include "ferry/core/scalar.h"
#include "ferry/core/storage.h"
#include "ferry/core/tensor.h"

namespace ferry {
namespace {

// A CPU tensor over `storage_values` (written with the copy rules into dtype), viewed with
// the given sizes and strides (contiguous when strides are empty).
Tensor make(ScalarType dtype, const std::vector<Scalar>& storage_values, std::vector<int64_t> sizes,
            std::vector<int64_t> strides = {}, int64_t offset = 0) {
  if (strides.empty()) {
    const DimVector s = contiguous_strides(sizes);
    strides.assign(s.begin(), s.end());
  }
  const size_t n = std::max<size_t>(storage_values.size(), 1);
  Storage storage(n * element_size(dtype), cpu_allocator(), Device("cpu"));
  auto* bytes = static_cast<char*>(storage.data());
  for (size_t i = 0; i < storage_values.size(); ++i) {
    storage_values[i].to_element(bytes + i * element_size(dtype), dtype);
  }
  return make_tensor(std::move(storage), dtype, sizes, strides, offset);
}

std::vector<Scalar> range(int64_t n, bool floating = true) {
  std::vector<Scalar> v;
  for (int64_t i = 0; i < n; ++i)
    v.push_back(floating ? Scalar(static_cast<double>(i)) : Scalar(i));
  return v;
}

Tensor vec(ScalarType dtype, const std::vector<Scalar>& values) {
  return make(dtype, values, {static_cast<int64_t>(values.size())});
}

const double kNan = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();
using C = std::complex<double>;

TEST(Printing, Scalars) {
  EXPECT_EQ(make(kFloat, {3.5}, {}).str(), "tensor(3.5000)");
  EXPECT_EQ(make(kFloat, {3.0}, {}).str(), "tensor(3.)");
  EXPECT_EQ(make(kInt64, {5}, {}).str(), "tensor(5)");
  EXPECT_EQ(make(kBool, {true}, {}).str(), "tensor(True)");
  EXPECT_EQ(make(kDouble, {-0.25}, {}).str(), "tensor(-0.2500, dtype=ferry.float64)");
  EXPECT_EQ(make(kComplex64, {C(1, 2)}, {}).str(), "tensor(1.+2.j)");
}

TEST(Printing, Matrices) {
  EXPECT_EQ(make(kFloat, range(6), {2, 3}).str(),
            "tensor([[0., 1., 2.],\n"
            "        [3., 4., 5.]])");
  EXPECT_EQ(make(kInt64, range(8, false), {2, 2, 2}).str(),
            "tensor([[[0, 1],\n"
            "         [2, 3]],\n"
            "\n"
            "        [[4, 5],\n"
            "         [6, 7]]])");
  EXPECT_EQ(make(kBool, {true, false, false, true}, {2, 2}).str(),
            "tensor([[ True, False],\n"
            "        [False,  True]])");
}

TEST(Printing, ColumnsShareOneWidth) {
  EXPECT_EQ(vec(kInt64, {1, -20, 300}).str(), "tensor([  1, -20, 300])");
  EXPECT_EQ(vec(kFloat, {1.0, 100.0}).str(), "tensor([  1., 100.])");
  EXPECT_EQ(vec(kFloat, {0.5, 1.25, -3.0}).str(), "tensor([ 0.5000,  1.2500, -3.0000])");
  EXPECT_EQ(vec(kBool, {true, false}).str(), "tensor([ True, False])");
}

TEST(Printing, ViewsAreReadThroughTheirStrides) {
  // The transpose of [[0, 1, 2], [3, 4, 5]].
  EXPECT_EQ(make(kFloat, range(6), {3, 2}, {1, 3}).str(),
            "tensor([[0., 3.],\n"
            "        [1., 4.],\n"
            "        [2., 5.]])");
  // Every third element from offset 1.
  EXPECT_EQ(make(kFloat, range(10), {3}, {3}, 1).str(), "tensor([1., 4., 7.])");
  // An expanded scalar.
  EXPECT_EQ(make(kFloat, {7.0}, {2, 2}, {0, 0}).str(),
            "tensor([[7., 7.],\n"
            "        [7., 7.]])");
  // A column of a 3-d tensor.
  EXPECT_EQ(make(kInt64, range(24, false), {2, 3}, {12, 4}, 1).str(),
            "tensor([[ 1,  5,  9],\n"
            "        [13, 17, 21]])");
}

TEST(Printing, DTypeSuffixOnlyForNonDefaultDTypes) {
  EXPECT_EQ(vec(kFloat64, {1.5}).str(), "tensor([1.5000], dtype=ferry.float64)");
  EXPECT_EQ(vec(kBFloat16, {1.0, 2.5}).str(), "tensor([1.0000, 2.5000], dtype=ferry.bfloat16)");
  EXPECT_EQ(vec(kFloat16, {0.1}).str(), "tensor([0.1000], dtype=ferry.float16)");
  EXPECT_EQ(vec(kFloat8_e4m3fn, {1.0, 0.5}).str(),
            "tensor([1.0000, 0.5000], dtype=ferry.float8_e4m3fn)");
  EXPECT_EQ(vec(kFloat8_e5m2, {2.0}).str(), "tensor([2.], dtype=ferry.float8_e5m2)");
  EXPECT_EQ(vec(kInt32, {1, 2}).str(), "tensor([1, 2], dtype=ferry.int32)");
  EXPECT_EQ(vec(kInt16, {-7}).str(), "tensor([-7], dtype=ferry.int16)");
  EXPECT_EQ(vec(kInt8, {-128}).str(), "tensor([-128], dtype=ferry.int8)");
  EXPECT_EQ(vec(kUInt8, {255}).str(), "tensor([255], dtype=ferry.uint8)");
  EXPECT_EQ(vec(kInt64, {1}).str(), "tensor([1])");
  EXPECT_EQ(vec(kBool, {false}).str(), "tensor([False])");
  EXPECT_EQ(vec(kComplex64, {C(1, 0)}).str(), "tensor([1.+0.j])");
  EXPECT_EQ(vec(kComplex128, {C(1, 2)}).str(), "tensor([1.+2.j], dtype=ferry.complex128)");
}

TEST(Printing, EmptyTensors) {
  EXPECT_EQ(make(kFloat, {}, {0}).str(), "tensor([])");
  EXPECT_EQ(make(kFloat, {}, {0, 3}).str(), "tensor([], size=(0, 3))");
  // With no values to infer it from, every dtype but the default float32 is printed.
  EXPECT_EQ(make(kInt64, {}, {0}).str(), "tensor([], dtype=ferry.int64)");
  EXPECT_EQ(make(kBool, {}, {2, 0, 1}).str(), "tensor([], size=(2, 0, 1), dtype=ferry.bool)");
}

TEST(Printing, ScientificNotation) {
  // Ratio of the largest to the smallest nonzero magnitude above 1000.
  EXPECT_EQ(vec(kFloat, {1e-5, 1.0}).str(), "tensor([1.0000e-05, 1.0000e+00])");
  // Integer values, but larger than 1e8.
  EXPECT_EQ(vec(kFloat, {1.0, 1e9}).str(), "tensor([1.0000e+00, 1.0000e+09])");
  // Smallest below 1e-4 (non-integer values only).
  EXPECT_EQ(vec(kFloat, {0.00005, 0.00007}).str(), "tensor([5.0000e-05, 7.0000e-05])");
  EXPECT_EQ(vec(kFloat64, {2.5e8 + 0.5}).str(), "tensor([2.5000e+08], dtype=ferry.float64)");
  // Zeros don't count toward the range; in scientific mode they take the common width.
  EXPECT_EQ(vec(kFloat, {0.0, 1e-6, 1.0}).str(), "tensor([0.0000e+00, 1.0000e-06, 1.0000e+00])");
}

TEST(Printing, NanInfAndSignedZero) {
  EXPECT_EQ(vec(kFloat, {kNan, kInf, -kInf, 1.0}).str(), "tensor([nan, inf, -inf, 1.])");
  EXPECT_EQ(vec(kFloat, {kNan, 0.5}).str(), "tensor([   nan, 0.5000])");
  EXPECT_EQ(vec(kFloat, {0.0, 0.0}).str(), "tensor([0., 0.])");
  EXPECT_EQ(vec(kFloat, {-0.0}).str(), "tensor([-0.])");
  EXPECT_EQ(vec(kFloat, {kNan}).str(), "tensor([nan])");
}

TEST(Printing, ComplexValues) {
  EXPECT_EQ(vec(kComplex64, {C(1, 2), C(-3.5, -1)}).str(), "tensor([ 1.0000+2.j, -3.5000-1.j])");
  EXPECT_EQ(vec(kComplex64, {C(0.5, -0.25)}).str(), "tensor([0.5000-0.2500j])");
}

TEST(Printing, LazyBitsApplyToValues) {
  Tensor c = vec(kComplex64, {C(1, 2)});
  c.impl()->set_conj(true);
  EXPECT_EQ(c.str(), "tensor([1.-2.j])");
  Tensor n = vec(kFloat, {1.0, -2.0});
  n.impl()->set_neg(true);
  EXPECT_EQ(n.str(), "tensor([-1.,  2.])");
  Tensor both = vec(kComplex128, {C(1, 2)});
  both.impl()->set_conj(true);
  both.impl()->set_neg(true);
  EXPECT_EQ(both.str(), "tensor([-1.+2.j], dtype=ferry.complex128)");
}

TEST(Printing, RequiresGradSuffix) {
  Tensor t = vec(kFloat, {1.0, 2.0});
  t.impl()->set_requires_grad(true);
  EXPECT_EQ(t.str(), "tensor([1., 2.], requires_grad=True)");
}

TEST(Printing, LongRowsWrapAt80Columns) {
  EXPECT_EQ(make(kFloat, range(30), {30}).str(),
            "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n"
            "        14., 15., 16., 17., 18., 19., 20., 21., 22., 23., 24., 25., 26., 27.,\n"
            "        28., 29.])");
  // A suffix that would pass column 80 goes on its own line.
  EXPECT_EQ(make(kFloat64, range(14), {14}).str(),
            "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.],\n"
            "       dtype=ferry.float64)");
  EXPECT_EQ(make(kFloat64, range(13), {13}).str(),
            "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12.],\n"
            "       dtype=ferry.float64)");
  EXPECT_EQ(make(kFloat64, range(12), {12}).str(),
            "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11.],\n"
            "       dtype=ferry.float64)");
  EXPECT_EQ(make(kFloat64, range(10), {10}).str(),
            "tensor([0., 1., 2., 3., 4., 5., 6., 7., 8., 9.], dtype=ferry.float64)");
}

TEST(Printing, SummarizesBeyondAThousandElements) {
  EXPECT_EQ(make(kInt64, range(2000, false), {2000}).str(),
            "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])");
  EXPECT_EQ(make(kInt64, range(2000, false), {40, 50}).str(),
            "tensor([[   0,    1,    2,  ...,   47,   48,   49],\n"
            "        [  50,   51,   52,  ...,   97,   98,   99],\n"
            "        [ 100,  101,  102,  ...,  147,  148,  149],\n"
            "        ...,\n"
            "        [1850, 1851, 1852,  ..., 1897, 1898, 1899],\n"
            "        [1900, 1901, 1902,  ..., 1947, 1948, 1949],\n"
            "        [1950, 1951, 1952,  ..., 1997, 1998, 1999]])");
  // The formatter sees only the summarized values: 1999/1 > 1000 picks scientific notation,
  // and seven 10-character elements no longer fit in a row.
  EXPECT_EQ(make(kFloat, range(2000), {40, 50}).str(),
            "tensor([[0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 4.7000e+01, 4.8000e+01,\n"
            "         4.9000e+01],\n"
            "        [5.0000e+01, 5.1000e+01, 5.2000e+01,  ..., 9.7000e+01, 9.8000e+01,\n"
            "         9.9000e+01],\n"
            "        [1.0000e+02, 1.0100e+02, 1.0200e+02,  ..., 1.4700e+02, 1.4800e+02,\n"
            "         1.4900e+02],\n"
            "        ...,\n"
            "        [1.8500e+03, 1.8510e+03, 1.8520e+03,  ..., 1.8970e+03, 1.8980e+03,\n"
            "         1.8990e+03],\n"
            "        [1.9000e+03, 1.9010e+03, 1.9020e+03,  ..., 1.9470e+03, 1.9480e+03,\n"
            "         1.9490e+03],\n"
            "        [1.9500e+03, 1.9510e+03, 1.9520e+03,  ..., 1.9970e+03, 1.9980e+03,\n"
            "         1.9990e+03]])");
  // Small dimensions of a summarized tensor print whole.
  const std::string tall = make(kInt64, range(1001, false), {1001, 1}).str();
  EXPECT_EQ(tall,
            "tensor([[   0],\n"
            "        [   1],\n"
            "        [   2],\n"
            "        ...,\n"
            "        [ 998],\n"
            "        [ 999],\n"
            "        [1000]])");
  // A thousand elements are not summarized.
  EXPECT_EQ(make(kInt64, range(1000, false), {1000}).str().find("..."), std::string::npos);
}

TEST(Printing, DeviceTensorsNameTheirDevice) {
  Tensor sim = vec(kFloat, {1.0, 2.0}).to(Device("sim:0"));
  EXPECT_EQ(sim.str(), "tensor([1., 2.], device='sim:0')");
  Tensor half = vec(kHalf, {0.5}).to(Device("sim:0"));
  EXPECT_EQ(half.str(), "tensor([0.5000], device='sim:0', dtype=ferry.float16)");
  Tensor empty = make(kInt64, {}, {0, 2}).to(Device("sim:0"));
  EXPECT_EQ(empty.str(), "tensor([], device='sim:0', size=(0, 2), dtype=ferry.int64)");
}

TEST(Printing, StreamOperatorAndUndefined) {
  std::ostringstream out;
  out << vec(kFloat, {1.5});
  EXPECT_EQ(out.str(), "tensor([1.5000])");
  EXPECT_EQ(Tensor().str(), "tensor(undefined)");
}

}  // namespace
}  // namespace ferry
