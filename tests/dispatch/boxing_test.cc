// Boxed calls: typed calls through boxed fallbacks and kernels (and back into typed kernels),
// Tensor& round-trips, every IValue type through call_boxed, tuple and void results, the
// tracing fallback, and static registration with the FERRY_LIBRARY macros.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "ferry/dispatch/dispatcher.h"
#include "ferry/dispatch/library.h"
#include "ferry/dispatch/tracing.h"
#include "tests/dispatch/dispatch_test_util.h"

namespace ferry {
namespace {

using K = DispatchKey;
using Strings = std::vector<std::string>;
using testing::kernel_log;
using testing::tensor_on;

using testing::D;

class BoxingTest : public ::testing::Test {
 protected:
  void SetUp() override { kernel_log().clear(); }
};

// ---- Tensor& round-trips ------------------------------------------------------------------

using Inplace = Tensor&(Tensor&, const Tensor&, bool);

Tensor& inplace_cpu(Tensor& self, const Tensor& src, bool flag) {
  kernel_log().push_back(flag ? "cpu:true" : "cpu:false");
  self.data_ptr<float>()[0] = src.data_ptr<float>()[0] + 1;  // writes through the shared impl
  return self;
}

TEST_F(BoxingTest, TensorRefRoundTripsThroughABoxedFallback) {
  auto def = D().def("test::inplace_(Tensor(a!) self, Tensor src, bool flag=False) -> Tensor(a!)");
  auto cpu = D().impl("test::inplace_", K::CPU, &inplace_cpu);
  const auto op = D().find("test::inplace_").typed<Inplace>();
  Tensor self = tensor_on(Device("cpu"));
  Tensor src = tensor_on(Device("cpu"));
  src.data_ptr<float>()[0] = 41;

  Tensor& direct = op.call(self, src, true);
  EXPECT_EQ(&direct, &self);
  {
    TraceGuard trace;  // the Tracing fallback is boxed: arguments go onto a stack and back
    Tensor& traced = op.call(self, src, false);
    EXPECT_EQ(&traced, &self);
    EXPECT_EQ(trace.names(), Strings({"test::inplace_"}));
  }
  EXPECT_EQ(self.data_ptr<float>()[0], 42.0f);
  EXPECT_EQ(kernel_log(), Strings({"cpu:true", "cpu:false"}));
}

void boxed_inplace(const OperatorHandle&, DispatchKeySet, Stack* stack) {
  ASSERT_EQ(stack->size(), 3u);
  kernel_log().push_back("boxed:" + std::string((*stack)[2].to_bool() ? "true" : "false"));
  IValue self = (*stack)[0];
  stack->clear();
  stack->push_back(self);
}
void boxed_wrong_result(const OperatorHandle&, DispatchKeySet, Stack* stack) {
  IValue src = (*stack)[1];
  stack->clear();
  stack->push_back(src);
}

TEST_F(BoxingTest, TensorRefRoundTripsThroughABoxedKernel) {
  auto def = D().def("test::boxed_(Tensor(a!) self, Tensor src, bool flag) -> Tensor(a!)");
  const auto op = D().find("test::boxed_").typed<Inplace>();
  Tensor self = tensor_on(Device("sim:0"));
  Tensor src = tensor_on(Device("sim:0"));
  {
    auto sim = D().impl_boxed("test::boxed_", K::Sim, &boxed_inplace);
    Tensor& r = op.call(self, src, true);
    EXPECT_EQ(&r, &self);
    EXPECT_EQ(kernel_log(), Strings({"boxed:true"}));
  }
  auto wrong = D().impl_boxed("test::boxed_", K::Sim, &boxed_wrong_result);
  try {
    op.call(self, src, true);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("none of the caller's Tensor& arguments"),
              std::string::npos)
        << e.what();
  }
}

// ---- every argument type through call_boxed -----------------------------------------------

using Everything = Tensor(const Tensor&, int64_t, double, bool, const Scalar&, ScalarType, Device,
                          MemoryFormat, IntArrayRef, ArrayRef<Tensor>, const std::optional<Tensor>&,
                          std::optional<int64_t>);

Tensor everything_cpu(const Tensor& self, int64_t n, double x, bool b, const Scalar& s,
                      ScalarType dtype, Device device, MemoryFormat format, IntArrayRef sizes,
                      ArrayRef<Tensor> list, const std::optional<Tensor>& maybe,
                      std::optional<int64_t> opt) {
  std::ostringstream out;
  out << n << " " << x << " " << b << " " << s << " " << dtype << " " << device << " " << format
      << " " << sizes << " " << list.size() << " " << maybe.has_value() << " "
      << (opt ? std::to_string(*opt) : "none");
  kernel_log().push_back(out.str());
  return self;
}

TEST_F(BoxingTest, EveryArgumentTypeRoundTrips) {
  auto def = D().def(
      "test::everything(Tensor self, int n, float x, bool b, Scalar s, ScalarType dtype, "
      "Device device, MemoryFormat format, int[] sizes, Tensor[] list, Tensor? maybe=None, "
      "int? opt=None) -> Tensor");
  auto cpu = D().impl("test::everything", K::CPU, &everything_cpu);
  const OperatorHandle op = D().find("test::everything");
  const Tensor self = tensor_on(Device("cpu"));
  const std::vector<Tensor> list{tensor_on(Device("cpu")), tensor_on(Device("cpu"))};
  const std::vector<int64_t> sizes{2, 3};

  Stack stack{IValue(self),
              IValue(int64_t{7}),
              IValue(2.5),
              IValue(true),
              IValue(Scalar(1.5)),
              IValue(kBFloat16),
              IValue(Device("cuda:1")),
              IValue(MemoryFormat::ChannelsLast),
              IValue(IntArrayRef(sizes)),
              IValue(list),
              IValue(),
              IValue(int64_t{-4})};
  op.call_boxed(&stack);
  ASSERT_EQ(stack.size(), 1u);
  EXPECT_TRUE(stack[0].to_tensor().is_same(self));

  // The same call typed, through the boxed tracing fallback into the typed kernel.
  TraceGuard trace;
  const Tensor r =
      op.typed<Everything>().call(self, 7, 2.5, true, Scalar(1.5), kBFloat16, Device("cuda:1"),
                                  MemoryFormat::ChannelsLast, sizes, list, std::nullopt, -4);
  EXPECT_TRUE(r.is_same(self));
  ASSERT_EQ(kernel_log().size(), 2u);
  EXPECT_EQ(kernel_log()[0], "7 2.5 1 1.5 BFloat16 cuda:1 channels_last [2, 3] 2 0 -4");
  EXPECT_EQ(kernel_log()[1], kernel_log()[0]);
}

TEST_F(BoxingTest, CallBoxedTakesKeysFromTensorsAndTensorLists) {
  auto def = D().def("test::lists(Tensor[] xs) -> ()");
  auto cpu =
      D().impl("test::lists", K::CPU, [](ArrayRef<Tensor>) { kernel_log().push_back("cpu"); });
  auto sim =
      D().impl("test::lists", K::Sim, [](ArrayRef<Tensor>) { kernel_log().push_back("sim"); });
  const OperatorHandle op = D().find("test::lists");
  Stack stack{IValue(std::vector<Tensor>{tensor_on(Device("cpu")), tensor_on(Device("sim:0"))})};
  op.call_boxed(&stack);
  EXPECT_TRUE(stack.empty());
  stack = {IValue(std::vector<Tensor>{tensor_on(Device("cpu"))})};
  op.call_boxed(&stack);
  EXPECT_EQ(kernel_log(), Strings({"sim", "cpu"}));
  Stack too_short;
  EXPECT_THROW(op.call_boxed(&too_short), Error);
  IncludeDispatchKeyGuard cpu_please(K::CPU);
  Stack wrong_type{IValue(int64_t{1})};
  try {
    op.call_boxed(&wrong_type);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected an IValue holding Tensor[], but it holds int"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(BoxingTest, TupleAndVoidResultsThroughTheBoxedPath) {
  using Pair = std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&);
  auto def = D().def("test::swap(Tensor a, Tensor b) -> (Tensor, Tensor)");
  auto cpu = D().impl("test::swap", K::CPU,
                      [](const Tensor& a, const Tensor& b) { return std::make_tuple(b, a); });
  auto def2 = D().def("test::sink(Tensor a) -> ()");
  auto cpu2 = D().impl("test::sink", K::CPU, [](const Tensor&) { kernel_log().push_back("sink"); });
  const Tensor a = tensor_on(Device("cpu")), b = tensor_on(Device("cpu"));
  TraceGuard trace;
  auto [x, y] = D().find("test::swap").typed<Pair>().call(a, b);
  EXPECT_TRUE(x.is_same(b));
  EXPECT_TRUE(y.is_same(a));
  D().find("test::sink").typed<void(const Tensor&)>().call(a);
  EXPECT_EQ(kernel_log(), Strings({"sink"}));
  EXPECT_EQ(trace.names(), Strings({"test::swap", "test::sink"}));
}

// ---- tracing --------------------------------------------------------------------------------

using Unary = Tensor(const Tensor&);

Tensor inner_cpu(const Tensor& t) { return t; }
Tensor outer_cpu(const Tensor& t) {
  static const auto inner = D().find("test::inner").typed<Unary>();
  return inner.call(t);
}

TEST_F(BoxingTest, TracingRecordsOutermostCallsUnlessAskedForNested) {
  auto d1 = D().def("test::inner(Tensor self) -> Tensor");
  auto d2 = D().def("test::outer(Tensor self) -> Tensor");
  auto k1 = D().impl("test::inner", K::CPU, &inner_cpu);
  auto k2 = D().impl("test::outer", K::CPU, &outer_cpu);
  const auto outer = D().find("test::outer").typed<Unary>();
  const Tensor t = tensor_on(Device("cpu"));
  outer.call(t);  // not traced: no guard
  {
    TraceGuard trace;
    outer.call(t);
    outer.call(t);
    EXPECT_EQ(trace.names(), Strings({"test::outer", "test::outer"}));
    {
      TraceGuard nested(true);
      outer.call(t);
      EXPECT_EQ(nested.names(), Strings({"test::outer", "test::inner"}));
    }
    EXPECT_EQ(trace.names().size(), 2u);  // the inner guard had the trace to itself
  }
  EXPECT_FALSE(local_dispatch_key_set().included.has(K::Tracing));
  EXPECT_FALSE(local_dispatch_key_set().excluded.has(K::Tracing));
}

TEST_F(BoxingTest, TracingRedispatchesBelowItselfIntoAutograd) {
  auto def = D().def("test::traced_grad(Tensor self) -> Tensor");
  auto cpu = D().impl("test::traced_grad", K::CPU, [](const Tensor& t) {
    kernel_log().push_back("cpu");
    return t;
  });
  auto ag = D().impl("test::traced_grad", K::AutogradCPU, [](DispatchKeySet ks, const Tensor& t) {
    kernel_log().push_back("autograd");
    static const auto op = D().find("test::traced_grad").typed<Unary>();
    return op.redispatch(ks.remove_above(K::AutogradCPU), t);
  });
  TraceGuard trace;
  D().find("test::traced_grad").typed<Unary>().call(tensor_on(Device("cpu"), true));
  EXPECT_EQ(trace.names(), Strings({"test::traced_grad"}));
  EXPECT_EQ(kernel_log(), Strings({"autograd", "cpu"}));
}

// ---- static registration ------------------------------------------------------------------

Tensor twice_cpu(const Tensor& t) {
  kernel_log().push_back("twice_cpu");
  return t;
}

FERRY_LIBRARY(testlib, m) { m.def("twice(Tensor self) -> Tensor"); }
FERRY_LIBRARY_IMPL(testlib, CPU, m) { m.impl("twice", &twice_cpu, "twice_cpu"); }
FERRY_LIBRARY_IMPL(testlib, Sim, m) { m.impl("testlib::twice", &twice_cpu, "twice_sim"); }

TEST_F(BoxingTest, StaticLibrariesRegisterAtLoadTime) {
  const auto op = D().find("testlib::twice").typed<Unary>();
  op.call(tensor_on(Device("cpu")));
  op.call(tensor_on(Device("sim:0")));
  EXPECT_EQ(kernel_log(), Strings({"twice_cpu", "twice_cpu"}));
  EXPECT_EQ(op.schema().str(), "testlib::twice(Tensor self) -> Tensor");
}

TEST_F(BoxingTest, ALibraryDeregistersWhenDestroyed) {
  {
    Library lib("scoped", K::CPU);
    lib.def("op(Tensor self) -> Tensor").impl("op", &twice_cpu);
    EXPECT_EQ(lib.size(), 2u);
    D().find("scoped::op").typed<Unary>().call(tensor_on(Device("cpu")));
  }
  EXPECT_EQ(D().try_find("scoped::op"), std::nullopt);
  EXPECT_EQ(kernel_log(), Strings({"twice_cpu"}));
}

TEST_F(BoxingTest, LibraryMisuseIsAnError) {
  Library no_key("misuse");
  EXPECT_THROW(no_key.impl("op", &twice_cpu), Error);
  EXPECT_THROW(no_key.def("other::op(Tensor self) -> Tensor"), Error);
  Library fallbacks("_", K::Sim);
  EXPECT_THROW(fallbacks.def("op(Tensor self) -> Tensor"), Error);
  EXPECT_THROW(fallbacks.impl("op", &twice_cpu), Error);
  EXPECT_THROW(Library(""), Error);
}

}  // namespace
}  // namespace ferry
