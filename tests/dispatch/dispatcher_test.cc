// The Dispatcher: priority between keys, key sets from arguments and guards, redispatch,
// BackendSelect, error messages, signature checks, deregistration of kernels, fallbacks and
// definitions, and introspection. Each test uses its own operator names: an operator's C++
// signature, once fixed, stays for the process.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "ferry/dispatch/dispatcher.h"
#include "ferry/dispatch/tracing.h"
#include "tests/dispatch/dispatch_test_util.h"

namespace ferry {
namespace {

using K = DispatchKey;
using Strings = std::vector<std::string>;
using testing::kernel_log;
using testing::tensor_on;

using testing::D;

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

// ---- kernels of test::unary(Tensor self) -> Tensor and friends ------------------------------

using Unary = Tensor(const Tensor&);

Tensor log_cpu(const Tensor& t) {
  kernel_log().push_back("cpu");
  return t;
}
Tensor log_sim(const Tensor& t) {
  kernel_log().push_back("sim");
  return t;
}
Tensor log_other(const Tensor& t) {
  kernel_log().push_back("other");
  return t;
}
// An autograd-like kernel: records, then hands the call to the keys below its own.
Tensor log_autograd(DispatchKeySet ks, const Tensor& t) {
  kernel_log().push_back("autograd:" + std::string(dispatch_key_name(ks.highest_priority_key())));
  static const auto op = D().find("test::prio").typed<Unary>();
  return op.redispatch(ks.remove_above(ks.highest_priority_key()), t);
}

class DispatcherTest : public ::testing::Test {
 protected:
  void SetUp() override { kernel_log().clear(); }
};

TEST_F(DispatcherTest, TracingThenAutogradThenBackend) {
  auto def = D().def("test::prio(Tensor self) -> Tensor");
  auto cpu = D().impl("test::prio", K::CPU, &log_cpu);
  auto sim = D().impl("test::prio", K::Sim, &log_sim);
  auto ag_cpu = D().impl("test::prio", K::AutogradCPU, &log_autograd);
  auto ag_sim = D().impl("test::prio", K::AutogradSim, &log_autograd);
  const auto op = D().find("test::prio").typed<Unary>();

  Tensor plain = tensor_on(Device("cpu"));
  Tensor grad = tensor_on(Device("cpu"), true);
  EXPECT_TRUE(op.call(plain).is_same(plain));
  EXPECT_EQ(kernel_log(), Strings({"cpu"}));
  kernel_log().clear();
  op.call(grad);
  EXPECT_EQ(kernel_log(), Strings({"autograd:AutogradCPU", "cpu"}));
  kernel_log().clear();
  {
    TraceGuard trace;
    op.call(tensor_on(Device("sim:0"), true));
    EXPECT_EQ(trace.names(), Strings({"test::prio"}));
  }
  EXPECT_EQ(kernel_log(), Strings({"autograd:AutogradSim", "sim"}));
}

TEST_F(DispatcherTest, NonCpuBackendWinsAmongMixedDevices) {
  auto def = D().def("test::mixed(Tensor a, Tensor b) -> Tensor");
  auto cpu = D().impl("test::mixed", K::CPU, [](const Tensor& a, const Tensor&) {
    kernel_log().push_back("cpu");
    return a;
  });
  auto sim = D().impl("test::mixed", K::Sim, [](const Tensor& a, const Tensor&) {
    kernel_log().push_back("sim");
    return a;
  });
  auto cuda = D().impl("test::mixed", K::CUDA, [](const Tensor& a, const Tensor&) {
    kernel_log().push_back("cuda");
    return a;
  });
  const auto op = D().find("test::mixed").typed<Tensor(const Tensor&, const Tensor&)>();
  const Tensor c = tensor_on(Device("cpu")), s = tensor_on(Device("sim:1")),
               g = tensor_on(Device("cuda:0"));
  op.call(c, c);
  op.call(c, s);
  op.call(s, c);
  op.call(g, s);
  op.call(c, Tensor());  // undefined tensors contribute nothing
  EXPECT_EQ(kernel_log(), Strings({"cpu", "sim", "sim", "cuda", "cpu"}));
}

TEST_F(DispatcherTest, KernelsSeeTheMaskedKeySet) {
  // The dispatcher's own default at the autograd keys is a fallthrough; ferry's autograd layer
  // registers a fallback over it (refusing operators without a formula). Shadow it here.
  auto autograd_fallthrough = D().fallback_fallthrough(K::AutogradCPU);
  static DispatchKeySet seen;
  auto def = D().def("test::seen(Tensor self) -> Tensor");
  auto k = D().impl("test::seen", K::CPU, [](DispatchKeySet ks, const Tensor& t) {
    seen = ks;
    return t;
  });
  const auto op = D().find("test::seen").typed<Unary>();
  op.call(tensor_on(Device("cpu"), true));
  // AutogradCPU and BackendSelect fall through for this operator, so they are masked out.
  EXPECT_EQ(seen, DispatchKeySet(K::CPU));
  {
    ExcludeDispatchKeyGuard no_cpu(K::CPU);
    IncludeDispatchKeyGuard with_sim(K::Sim);
    EXPECT_THROW(op.call(tensor_on(Device("cpu"))), NotImplementedError);
  }
  op.call(tensor_on(Device("cpu")));
  EXPECT_EQ(seen, DispatchKeySet(K::CPU));
}

TEST_F(DispatcherTest, IncludeAndExcludeGuardsSteerCalls) {
  auto def = D().def("test::steer(Tensor self) -> Tensor");
  auto cpu = D().impl("test::steer", K::CPU, &log_cpu);
  auto sim = D().impl("test::steer", K::Sim, &log_sim);
  const auto op = D().find("test::steer").typed<Unary>();
  const Tensor c = tensor_on(Device("cpu")), s = tensor_on(Device("sim:0"));
  {
    IncludeDispatchKeyGuard include(K::Sim);
    op.call(c);  // sim, included
    {
      ExcludeDispatchKeyGuard exclude(K::Sim);
      op.call(c);                                     // cpu: excluded beats included
      EXPECT_THROW(op.call(s), NotImplementedError);  // nothing left
    }
  }
  op.call(c);
  EXPECT_EQ(kernel_log(), Strings({"sim", "cpu", "cpu"}));
}

TEST_F(DispatcherTest, GuardsRestoreAfterAKernelThrows) {
  auto def = D().def("test::throws(Tensor self) -> Tensor");
  auto cpu = D().impl("test::throws", K::CPU, [](const Tensor& t) -> Tensor {
    ExcludeDispatchKeyGuard exclude(K::Sim);
    IncludeDispatchKeyGuard include(K::Tracing);
    FERRY_CHECK(!t.defined(), "kernel failed on purpose");
    return t;
  });
  const auto op = D().find("test::throws").typed<Unary>();
  const LocalDispatchKeySet before = local_dispatch_key_set();
  EXPECT_THROW(op.call(tensor_on(Device("cpu"))), Error);
  EXPECT_EQ(local_dispatch_key_set(), before);
}

TEST_F(DispatcherTest, MissingKernelNamesTheKeysThatHaveOne) {
  auto def = D().def("test::nokernel(Tensor self) -> Tensor");
  auto cpu = D().impl("test::nokernel", K::CPU, &log_other);
  auto ag = D().impl("test::nokernel", K::AutogradCPU, [](const Tensor& t) { return t; });
  const auto op = D().find("test::nokernel").typed<Unary>();
  const std::string msg = message_of([&] { op.call(tensor_on(Device("sim:0"))); });
  EXPECT_CONTAINS(msg,
                  "test::nokernel: no kernel for key Sim; kernels are registered for CPU, "
                  "AutogradCPU");
  EXPECT_CONTAINS(msg, "DispatchKeySet(Sim)");
  EXPECT_THROW(op.call(tensor_on(Device("sim:0"))), NotImplementedError);
  cpu.reset();
  ag.reset();
  EXPECT_CONTAINS(message_of([&] { op.call(tensor_on(Device("cpu"))); }),
                  "test::nokernel: no kernel for key CPU; no kernels are registered");
}

TEST_F(DispatcherTest, BackendSelectPicksTheBackendOfAFactory) {
  using Factory = Tensor(int64_t, Device);
  auto def = D().def("test::factory(int n, Device device) -> Tensor");
  auto cpu = D().impl("test::factory", K::CPU, [](int64_t, Device d) {
    kernel_log().push_back("cpu");
    return tensor_on(d);
  });
  auto sim = D().impl("test::factory", K::Sim, [](int64_t, Device d) {
    kernel_log().push_back("sim");
    return tensor_on(d);
  });
  const auto op = D().find("test::factory").typed<Factory>();
  EXPECT_CONTAINS(message_of([&] { op.call(3, Device("sim:0")); }),
                  "test::factory: no kernel for key Undefined (the call's dispatch key set is "
                  "empty: no tensor arguments");
  auto bs = D().impl("test::factory", K::BackendSelect, [](DispatchKeySet ks, int64_t n, Device d) {
    kernel_log().push_back("select");
    static const auto self = D().find("test::factory").typed<Factory>();
    return self.redispatch(ks.remove_above(K::BackendSelect) | backend_key(d.type()), n, d);
  });
  EXPECT_TRUE(op.call(3, Device("sim:0")).is_sim());
  EXPECT_TRUE(op.call(3, Device("cpu")).is_cpu());
  EXPECT_EQ(kernel_log(), Strings({"select", "sim", "select", "cpu"}));
}

TEST_F(DispatcherTest, SignatureMismatchNamesBothSignatures) {
  auto def = D().def("test::sig(Tensor self, int n) -> Tensor");
  auto cpu = D().impl("test::sig", K::CPU, [](const Tensor& t, int64_t) { return t; });
  const std::string at_impl = message_of(
      [&] { auto sim = D().impl("test::sig", K::Sim, [](const Tensor& t, double) { return t; }); });
  EXPECT_CONTAINS(at_impl, "ferry::Tensor (ferry::Tensor const&, double)");
  EXPECT_CONTAINS(at_impl, "ferry::Tensor (ferry::Tensor const&, long)");
  const std::string at_typed =
      message_of([&] { D().find("test::sig").typed<Tensor(Tensor, int64_t)>(); });
  EXPECT_CONTAINS(at_typed, "typed<ferry::Tensor (ferry::Tensor, long)>()");
  EXPECT_CONTAINS(at_typed, "ferry::Tensor (ferry::Tensor const&, long)");
  EXPECT_NO_THROW(D().find("test::sig").typed<Tensor(const Tensor&, int64_t)>());
}

TEST_F(DispatcherTest, SignatureMustFitTheSchema) {
  // typed<>() fixes the operator's C++ signature for good (handles taken from it may outlive
  // every registration), so each run of this test (--gtest_repeat) takes a fresh name.
  static int run = 0;
  const std::string name = "test::fit" + std::to_string(run++);
  auto def = D().def(name + "(Tensor(a!) self, bool flag) -> Tensor(a!)");
  EXPECT_CONTAINS(message_of([&] {
                    auto k =
                        D().impl(name, K::CPU, [](Tensor& t, int64_t) -> Tensor& { return t; });
                  }),
                  "argument 2 ('flag') is bool in the schema, but its C++ type is int");
  EXPECT_CONTAINS(message_of([&] {
                    auto k =
                        D().impl(name, K::CPU, [](const Tensor& t, bool) -> Tensor { return t; });
                  }),
                  "argument 1 ('self') is written by the operator (Tensor(a!)), so its C++ "
                  "type must be Tensor&");
  EXPECT_CONTAINS(message_of([&] { D().find(name).typed<Tensor&(Tensor&)>(); }),
                  "the C++ signature has 1 argument(s), the schema 2");
  EXPECT_NO_THROW(D().find(name).typed<Tensor&(Tensor&, bool)>());
}

TEST_F(DispatcherTest, KernelsMayComeBeforeTheDefinition) {
  auto cpu = D().impl("test::late", K::CPU, &log_cpu, "log_cpu");
  EXPECT_EQ(D().try_find("test::late"), std::nullopt);
  EXPECT_CONTAINS(message_of([&] { auto d = D().def("test::late(Tensor a, Tensor b) -> Tensor"); }),
                  "the C++ signature has 1 argument(s), the schema 2");
  auto def = D().def("test::late(Tensor self) -> Tensor");
  D().find("test::late").typed<Unary>().call(tensor_on(Device("cpu")));
  EXPECT_EQ(kernel_log(), Strings({"cpu"}));
}

TEST_F(DispatcherTest, DefiningTwiceIsAnError) {
  auto def = D().def("test::twice(Tensor self) -> Tensor");
  EXPECT_CONTAINS(message_of([&] { auto again = D().def("test::twice(Tensor x) -> Tensor"); }),
                  "operator test::twice is defined already, as test::twice(Tensor self) -> "
                  "Tensor");
  EXPECT_CONTAINS(message_of([&] { D().find("test::nonexistent"); }), "\"test::nonexistent\"");
}

TEST_F(DispatcherTest, DeregisteringAKernelRestoresTheOneBefore) {
  auto def = D().def("test::dereg(Tensor self) -> Tensor");
  const auto op = D().find("test::dereg").typed<Unary>();
  const Tensor c = tensor_on(Device("cpu"));
  auto older = D().impl("test::dereg", K::CPU, &log_cpu);
  op.call(c);
  {
    auto newer = D().impl("test::dereg", K::CPU, &log_other);
    op.call(c);
  }
  op.call(c);
  auto newer = D().impl("test::dereg", K::CPU, &log_other);
  older.reset();  // removing a shadowed kernel leaves the newer one in charge
  op.call(c);
  newer.reset();
  EXPECT_THROW(op.call(c), NotImplementedError);
  EXPECT_EQ(kernel_log(), Strings({"cpu", "other", "cpu", "other"}));
  EXPECT_FALSE(op.has_kernel(K::CPU));
}

void terminal_fallback(const OperatorHandle& op, DispatchKeySet ks, Stack* stack) {
  kernel_log().push_back("fallback@" + std::string(dispatch_key_name(ks.highest_priority_key())) +
                         ":" + op.name());
  const size_t n = op.schema().arguments.size();
  IValue first = (*stack)[stack->size() - n];  // ops here return their first argument
  stack->resize(stack->size() - n);
  stack->push_back(std::move(first));
}
void other_fallback(const OperatorHandle& op, DispatchKeySet ks, Stack* stack) {
  terminal_fallback(op, ks, stack);
  kernel_log().back() = "other " + kernel_log().back();
}

TEST_F(DispatcherTest, DeregisteringAFallbackRestoresTheOneBefore) {
  auto def = D().def("test::fb(Tensor self) -> Tensor");
  auto cpu = D().impl("test::fb", K::CPU, &log_cpu);
  const auto op = D().find("test::fb").typed<Unary>();
  const Tensor s = tensor_on(Device("sim:0"));
  const Tensor c = tensor_on(Device("cpu"));
  {
    auto first = D().fallback(K::Sim, &terminal_fallback, "terminal");
    EXPECT_TRUE(op.call(s).is_same(s));
    {
      auto second = D().fallback(K::Sim, &other_fallback, "other");
      op.call(s);
    }
    op.call(s);
    op.call(c);  // an operator's own kernel beats the fallback of another key
    auto own = D().impl("test::fb", K::Sim, &log_sim);
    op.call(s);  // and beats the fallback of its own key
  }
  EXPECT_THROW(op.call(s), NotImplementedError);
  EXPECT_EQ(kernel_log(), Strings({"fallback@Sim:test::fb", "other fallback@Sim:test::fb",
                                   "fallback@Sim:test::fb", "cpu", "sim"}));
}

TEST_F(DispatcherTest, DeregisteringTheDefinition) {
  auto cpu = D().impl("test::undef", K::CPU, &log_cpu);
  {
    auto def = D().def("test::undef(Tensor self) -> Tensor");
    ASSERT_TRUE(D().try_find("test::undef").has_value());
    EXPECT_EQ(D().find("test::undef").schema().str(), "test::undef(Tensor self) -> Tensor");
  }
  EXPECT_EQ(D().try_find("test::undef"), std::nullopt);
  EXPECT_THROW(D().find("test::undef"), Error);
  auto def = D().def("test::undef(Tensor self) -> Tensor");
  D().find("test::undef").typed<Unary>().call(tensor_on(Device("cpu")));
  EXPECT_EQ(kernel_log(), Strings({"cpu"}));
}

TEST_F(DispatcherTest, FallthroughKernelSkipsAKeyForOneOperator) {
  auto def_a = D().def("test::ft_a(Tensor self) -> Tensor");
  auto def_b = D().def("test::ft_b(Tensor self) -> Tensor");
  auto a_cpu = D().impl("test::ft_a", K::CPU, &log_cpu);
  auto b_cpu = D().impl("test::ft_b", K::CPU, &log_cpu);
  auto fb = D().fallback(K::AutogradCPU, &terminal_fallback, "terminal");
  auto skip = D().impl_fallthrough("test::ft_a", K::AutogradCPU);
  const Tensor g = tensor_on(Device("cpu"), true);
  D().find("test::ft_a").typed<Unary>().call(g);
  D().find("test::ft_b").typed<Unary>().call(g);
  skip.reset();
  D().find("test::ft_a").typed<Unary>().call(g);
  EXPECT_EQ(kernel_log(),
            Strings({"cpu", "fallback@AutogradCPU:test::ft_b", "fallback@AutogradCPU:test::ft_a"}));
}

TEST_F(DispatcherTest, FallthroughFallbackSkipsAKeyForAllOperators) {
  auto def = D().def("test::ftfb(Tensor self) -> Tensor");
  auto cpu = D().impl("test::ftfb", K::CPU, &log_cpu);
  const auto op = D().find("test::ftfb").typed<Unary>();
  auto stop = D().fallback(K::AutogradCPU, &terminal_fallback, "terminal");
  op.call(tensor_on(Device("cpu"), true));
  {
    auto through = D().fallback_fallthrough(K::AutogradCPU);
    op.call(tensor_on(Device("cpu"), true));
  }
  op.call(tensor_on(Device("cpu"), true));
  EXPECT_EQ(kernel_log(),
            Strings({"fallback@AutogradCPU:test::ftfb", "cpu", "fallback@AutogradCPU:test::ftfb"}));
}

TEST_F(DispatcherTest, BadRegistrationsAreRejected) {
  const std::string op_message =
      message_of([] { auto h = D().impl_fallthrough("test::bad", K::Undefined); });
  EXPECT_CONTAINS(op_message,
                  "test::bad: expected a kernel for the Undefined key, but got a "
                  "fallthrough");
  const std::string fallback_message =
      message_of([] { auto h = D().fallback_fallthrough(K::Undefined); });
  EXPECT_CONTAINS(fallback_message,
                  "fallback: expected a kernel for the Undefined key, but got a fallthrough");
  EXPECT_THROW(auto h = D().impl("test::bad", K::EndOfKeys, &log_cpu), Error);
  EXPECT_THROW(auto h = D().fallback(K::CPU, nullptr, "null"), Error);
  EXPECT_THROW(auto h = D().def("bad(Tensor self) -> Tensor"), Error);  // no namespace
}

TEST_F(DispatcherTest, DescribeShowsEachCell) {
  auto def = D().def("test::described(Tensor self) -> Tensor");
  auto cpu = D().impl("test::described", K::CPU, &log_cpu, "log_cpu");
  auto boxed = D().impl_boxed("test::described", K::Sim, &terminal_fallback, "boxed_sim");
  auto ft = D().impl_fallthrough("test::described", K::CUDA);
  const auto ops = D().describe();
  const auto it = std::find_if(ops.begin(), ops.end(),
                               [](const OperatorInfo& o) { return o.name == "test::described"; });
  ASSERT_NE(it, ops.end());
  EXPECT_EQ(it->schema, "test::described(Tensor self) -> Tensor");
  EXPECT_EQ(it->cpp_signature, "ferry::Tensor (ferry::Tensor const&)");
  auto cell = [&](DispatchKey k) { return it->cells[static_cast<size_t>(k)]; };
  EXPECT_EQ(cell(K::CPU).kind, DispatchCell::Kind::Kernel);
  EXPECT_EQ(cell(K::CPU).name, "log_cpu");
  EXPECT_EQ(cell(K::Sim).kind, DispatchCell::Kind::BoxedKernel);
  EXPECT_EQ(cell(K::Sim).name, "boxed_sim");
  EXPECT_EQ(cell(K::CUDA).kind, DispatchCell::Kind::Fallthrough);
  // ferry's autograd layer serves the autograd keys of operators without a formula.
  EXPECT_EQ(cell(K::AutogradCPU).kind, DispatchCell::Kind::Fallback);
  EXPECT_EQ(cell(K::AutogradCPU).name, "autograd_fallback");
  EXPECT_EQ(cell(K::BackendSelect).kind, DispatchCell::Kind::FallthroughFallback);
  EXPECT_EQ(cell(K::Tracing).kind, DispatchCell::Kind::Fallback);
  EXPECT_EQ(cell(K::Tracing).name, "tracing");
  EXPECT_EQ(cell(K::Undefined).kind, DispatchCell::Kind::None);
  EXPECT_EQ(cell(K::Undefined).kind_name(), "—");
  const auto fallbacks = D().describe_fallbacks();
  EXPECT_EQ(fallbacks[static_cast<size_t>(K::Tracing)].name, "tracing");
  EXPECT_EQ(fallbacks[static_cast<size_t>(K::CPU)].kind, DispatchCell::Kind::None);
}

}  // namespace
}  // namespace ferry
