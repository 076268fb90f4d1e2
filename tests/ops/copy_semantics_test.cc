// copy_'s rules beyond random values: error cases and their messages, a destination left as
// it was when a check fails, partial overlap through a temporary, in-place (full) overlap, the
// early exits (checked on read-only memory, so a write would fault), and the device choice.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <limits>
#include <random>

#include "ferry/dispatch/dispatcher.h"
#include "ferry/ferry.h"
#include "ferry/iter/copy_stub.h"
#include "tests/ops/naive_copy.h"
#include "tests/support/random.h"

namespace ferry {
namespace {

using testing::check_copy;
using ::testing::ElementsAre;
using testing::fill_random;
using ::testing::HasSubstr;
using testing::random_view;
using testing::storage_bytes;

// The values a tensor reads as (lazy bits applied), as doubles (real part for complex).
std::vector<double> double_values(const Tensor& t) {
  Tensor d = t.to(kFloat64, false, true).contiguous();
  const double* p = d.data_ptr<double>();
  return std::vector<double>(p, p + d.numel());
}

TEST(CopySemantics, ShapeMismatchNamesBothSizesAndTheDimension) {
  Tensor dst = zeros({2, 3});
  const auto before = storage_bytes(dst);
  try {
    dst.copy_(ones({4, 3}));
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("size of tensor a (2) must match the size of tensor b (4) "
                                    "at non-singleton dimension 0"));
  }
  EXPECT_EQ(storage_bytes(dst), before);
  Tensor small = zeros({3});
  try {
    small.copy_(ones({2, 3}));
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("output with shape [3] doesn't match the broadcast shape "
                                    "[2, 3]"));
  }
  // Empty destinations still check shapes.
  Tensor empty_dst = zeros({0, 3});
  EXPECT_THROW(empty_dst.copy_(ones({2, 3})), ShapeError);
}

TEST(CopySemantics, ExpandedDestinationIsRefused) {
  Tensor base = zeros({1, 3});
  Tensor dst = base.expand({4, 3});
  try {
    dst.copy_(ones({4, 3}));
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("copy_: the destination (sizes [4, 3], strides [0, 1]) has "
                                    "elements that share memory"));
  }
  EXPECT_THAT(double_values(base), ElementsAre(0, 0, 0));
}

TEST(CopySemantics, UndefinedTensorsAreRefused) {
  Tensor undefined;
  Tensor x = zeros({2});
  EXPECT_THROW(x.copy_(undefined), Error);
}

TEST(CopySemantics, ConversionExamples) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  float in[] = {1.7f, -1.7f, nan, 0.5f, 0.0f};
  Tensor src = from_blob(in, {5});
  Tensor i32 = empty({5}, kInt32);
  i32.copy_(src);
  EXPECT_THAT(std::vector<int32_t>(i32.data_ptr<int32_t>(), i32.data_ptr<int32_t>() + 5),
              ElementsAre(1, -1, std::numeric_limits<int32_t>::min(), 0, 0));
  Tensor b = empty({5}, kBool);
  b.copy_(src);
  EXPECT_THAT(std::vector<bool>(b.data_ptr<bool>(), b.data_ptr<bool>() + 5),
              ElementsAre(true, true, true, true, false));
  std::complex<float> z[] = {{1.5f, 2.0f}, {-3.0f, -4.0f}};
  Tensor c = from_blob(z, {2}, kComplex64);
  Tensor real = empty({2});
  real.copy_(c);
  EXPECT_THAT(double_values(real), ElementsAre(1.5, -3.0));
  // Lazy conj resolved in the copy; lazy neg too, wrapping in the integer type.
  Tensor resolved = empty({2}, kComplex128);
  resolved.copy_(c.conj());
  const auto* r = resolved.data_ptr<std::complex<double>>();
  EXPECT_EQ(r[0], std::complex<double>(1.5, -2.0));
  EXPECT_EQ(r[1], std::complex<double>(-3.0, 4.0));
  int8_t small[] = {-128, 5};
  Tensor i8 = from_blob(small, {2}, kInt8);
  Tensor negated = empty({2}, kInt8);
  negated.copy_(i8._neg_view());
  EXPECT_THAT(std::vector<int8_t>(negated.data_ptr<int8_t>(), negated.data_ptr<int8_t>() + 2),
              ElementsAre(-128, -5));
}

TEST(CopySemantics, BroadcastingSources) {
  Tensor dst = empty({2, 3}, kInt64);
  dst.copy_(arange(3));
  EXPECT_THAT(double_values(dst), ElementsAre(0, 1, 2, 0, 1, 2));
  dst.copy_(arange(2).view({2, 1}));
  EXPECT_THAT(double_values(dst), ElementsAre(0, 0, 0, 1, 1, 1));
  dst.copy_(full({}, 7));
  EXPECT_THAT(double_values(dst), ElementsAre(7, 7, 7, 7, 7, 7));
}

TEST(CopySemantics, ShiftedOverlapReadsTheSourceBeforeTheCopy) {
  Tensor x = arange(10, kFloat32);
  x.slice(0, 1, 10).copy_(x.slice(0, 0, 9));
  EXPECT_THAT(double_values(x), ElementsAre(0, 0, 1, 2, 3, 4, 5, 6, 7, 8));
  Tensor y = arange(10, kFloat32);
  y.slice(0, 0, 9).copy_(y.slice(0, 1, 10));
  EXPECT_THAT(double_values(y), ElementsAre(1, 2, 3, 4, 5, 6, 7, 8, 9, 9));
  // A transposed square onto itself: every element but the diagonal moves.
  Tensor m = arange(9, kFloat32).view({3, 3});
  m.copy_(m.t());
  EXPECT_THAT(double_values(m), ElementsAre(0, 3, 6, 1, 4, 7, 2, 5, 8));
  // A broadcast source inside the destination is read once, before any write.
  Tensor z = arange(8, kInt32);
  z.slice(0, 0, 4).copy_(z.slice(0, 2, 3).expand({4}));
  EXPECT_THAT(double_values(z), ElementsAre(2, 2, 2, 2, 4, 5, 6, 7));
}

TEST(CopySemantics, RandomOverlapsAcrossDtypes) {
  SCOPED_TRACE(testing::seed_trace());
  auto rng = testing::test_rng();
  // Both tensors are from_blob views of one buffer, so they share bytes but not a Storage,
  // and may have different dtypes: overlap is found by address.
  std::vector<uint64_t> buffer(4096);
  const ScalarType types[] = {kUInt8,   kInt16,   kInt32,     kInt64,    kFloat16,
                              kFloat32, kFloat64, kComplex64, kBFloat16, kFloat8_e5m2};
  for (int trial = 0; trial < 300; ++trial) {
    const ScalarType dt = types[rng() % std::size(types)];
    const ScalarType st = types[rng() % std::size(types)];
    DimVector sizes(1 + rng() % 3);
    for (auto& s : sizes) s = 1 + static_cast<int64_t>(rng() % 4);
    // Lay each view out on a scratch tensor, then place it on the shared buffer.
    const Tensor dl = random_view(rng, sizes, dt, false);
    const Tensor sl = random_view(rng, sizes, st, rng() % 2 == 0);
    Tensor whole_d =
        from_blob(buffer.data(), {static_cast<int64_t>(8 * buffer.size() / element_size(dt))}, dt);
    Tensor whole_s =
        from_blob(buffer.data(), {static_cast<int64_t>(8 * buffer.size() / element_size(st))}, st);
    Tensor dst = whole_d.as_strided(dl.sizes(), dl.strides(), dl.storage_offset() + rng() % 8);
    Tensor src = whole_s.as_strided(sl.sizes(), sl.strides(), sl.storage_offset() + rng() % 8);
    if (rng() % 3 == 0) src = src._neg_view();
    fill_random(whole_d, rng);
    const auto before = storage_bytes(whole_d);
    SCOPED_TRACE(::testing::Message()
                 << "dst " << dt << " " << dst.sizes() << " " << dst.strides() << " +"
                 << dst.storage_offset() << "; src " << st << " " << src.sizes() << " "
                 << src.strides() << " +" << src.storage_offset());
    dst.copy_(src);
    ASSERT_TRUE(check_copy(dst, src, before, before));
  }
}

TEST(CopySemantics, FullOverlapRunsInPlace) {
  std::complex<float> z[] = {{1, 2}, {3, -4}};
  Tensor x = from_blob(z, {2}, kComplex64);
  x.copy_(x.conj());
  EXPECT_EQ(z[0], std::complex<float>(1, -2));
  EXPECT_EQ(z[1], std::complex<float>(3, 4));
  int32_t bits[] = {1, -2, 3};
  Tensor as_int = from_blob(bits, {3}, kInt32);
  Tensor as_float = from_blob(bits, {3}, kFloat32);
  as_float.copy_(as_int);  // same bytes, element for element
  EXPECT_THAT(double_values(as_float), ElementsAre(1, -2, 3));
}

// A page the process may read but not write: an early exit that wrote would fault.
class ReadOnlyPage {
 public:
  ReadOnlyPage() {
    size_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    page_ = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(page_, MAP_FAILED);
    auto* f = static_cast<float*>(page_);
    for (int i = 0; i < 16; ++i) f[i] = static_cast<float>(i);
    EXPECT_EQ(mprotect(page_, size_, PROT_READ), 0);
  }
  ~ReadOnlyPage() { munmap(page_, size_); }
  float* data() const { return static_cast<float*>(page_); }

 private:
  void* page_;
  size_t size_;
};

TEST(CopySemantics, EarlyExitsDoNotTouchMemory) {
  ReadOnlyPage page;
  Tensor x = from_blob(page.data(), {4, 4});
  EXPECT_TRUE(x.copy_(x).is_same(x));
  x.copy_(x.alias());                  // same storage, offset, sizes, strides, dtype, bits
  x.copy_(x.view({16}).view({4, 4}));  // same data through other views
  Tensor t = x.t();
  t.copy_(x.t());
  Tensor nothing = x.slice(1, 2, 2);  // (4, 0)
  nothing.copy_(ones({4, 0}));
  Tensor flat_nothing = x.view({16}).slice(0, 3, 3);
  flat_nothing.copy_(ones({0}));
  EXPECT_EQ(page.data()[5], 5.0f);
}

TEST(CopySemantics, NonBlockingOnTheCpuIsComplete) {
  Tensor dst = empty({3}, kFloat64);
  dst.copy_(arange(3, kFloat32), /*non_blocking=*/true);
  EXPECT_THAT(double_values(dst), ElementsAre(0, 1, 2));
}

TEST(CopySemantics, RegisteredThroughTheDispatcher) {
  const OperatorHandle op = Dispatcher::singleton().find("ferry::copy_");
  EXPECT_TRUE(op.has_kernel(DispatchKey::CPU));
  EXPECT_TRUE(op.has_kernel(DispatchKey::Sim));
  EXPECT_TRUE(copy_stub.has_kernel(DeviceType::CPU));
}

// Every copy_stub call that reaches the kernels below, in order: the kernel's device type and
// the iterator's destination and source device types.
struct StubCall {
  DeviceType kernel, dst, src;
  bool operator==(const StubCall&) const = default;
};
std::vector<StubCall> g_stub_calls;
CopyStubFn g_sim_kernel = nullptr;
CopyStubFn g_cpu_kernel = nullptr;

void recording_sim_kernel(TensorIterator& iter, bool non_blocking) {
  g_stub_calls.push_back({DeviceType::Sim, iter.device_type(0), iter.device_type(1)});
  g_sim_kernel(iter, non_blocking);
}
void recording_cpu_kernel(TensorIterator& iter, bool non_blocking) {
  g_stub_calls.push_back({DeviceType::CPU, iter.device_type(0), iter.device_type(1)});
  g_cpu_kernel(iter, non_blocking);
}

TEST(CopySemantics, ANonCpuSideChoosesTheKernel) {
  ASSERT_TRUE(copy_stub.has_kernel(DeviceType::Sim));
  g_stub_calls.clear();
  g_sim_kernel = copy_stub.replace_kernel(DeviceType::Sim, &recording_sim_kernel);
  g_cpu_kernel = copy_stub.replace_kernel(DeviceType::CPU, &recording_cpu_kernel);
  struct Restore {
    ~Restore() {
      copy_stub.replace_kernel(DeviceType::Sim, g_sim_kernel);
      copy_stub.replace_kernel(DeviceType::CPU, g_cpu_kernel);
    }
  } restore;
  const Tensor host = arange(6, kFloat32).view({2, 3});
  Tensor on_sim = empty({3, 2}, TensorOptions(kFloat32).device(Device("sim:0")));
  on_sim.copy_(host.t());
  // The first call is copy_'s own; whatever the sim kernel runs inside (staging) comes after.
  ASSERT_FALSE(g_stub_calls.empty());
  EXPECT_EQ(g_stub_calls.front(), (StubCall{DeviceType::Sim, DeviceType::Sim, DeviceType::CPU}));
  g_stub_calls.clear();
  Tensor on_cpu = zeros({3, 2});
  on_cpu.copy_(on_sim);  // the cpu side is the destination now: still the sim kernel
  ASSERT_FALSE(g_stub_calls.empty());
  EXPECT_EQ(g_stub_calls.front(), (StubCall{DeviceType::Sim, DeviceType::CPU, DeviceType::Sim}));
  EXPECT_THAT(double_values(on_cpu), ElementsAre(0, 3, 1, 4, 2, 5));
}

}  // namespace
}  // namespace ferry
