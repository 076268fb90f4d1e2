// DispatchKey and DispatchKeySet: priority order, set algebra, iteration, printing; the key set
// of tensors and argument packs; the thread-local include/exclude sets and their guards.
#include <gtest/gtest.h>

#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include "ferry/dispatch/dispatch_key.h"
#include "ferry/dispatch/dispatch_key_extractor.h"
#include "ferry/dispatch/dispatch_key_set.h"
#include "ferry/dispatch/local_dispatch_key_set.h"
#include "tests/dispatch/dispatch_test_util.h"

namespace ferry {
namespace {

using K = DispatchKey;
using testing::tensor_on;

TEST(DispatchKey, PriorityOrderIsTracingThenAutogradThenBackends) {
  const DispatchKeySet all{K::CPU,           K::Sim,           K::CUDA,
                           K::BackendSelect, K::AutogradOther, K::AutogradCPU,
                           K::AutogradSim,   K::AutogradCUDA,  K::Tracing};
  EXPECT_EQ(all.highest_priority_key(), K::Tracing);
  EXPECT_EQ(all.remove(K::Tracing).highest_priority_key(), K::AutogradCUDA);
  EXPECT_EQ((all - DispatchKeySet::autograd() - K::Tracing).highest_priority_key(),
            K::BackendSelect);
  EXPECT_EQ(DispatchKeySet({K::CPU, K::Sim}).highest_priority_key(), K::Sim);
  EXPECT_EQ(DispatchKeySet({K::CPU, K::CUDA, K::Sim}).highest_priority_key(), K::CUDA);
  EXPECT_EQ(DispatchKeySet({K::AutogradCPU, K::CUDA}).highest_priority_key(), K::AutogradCPU);
  EXPECT_EQ(DispatchKeySet({K::Tracing, K::AutogradCUDA}).highest_priority_key(), K::Tracing);
  EXPECT_EQ(DispatchKeySet().highest_priority_key(), K::Undefined);
  EXPECT_EQ(DispatchKeySet().lowest_priority_key(), K::Undefined);
  EXPECT_EQ(DispatchKeySet({K::Sim, K::Tracing}).lowest_priority_key(), K::Sim);
}

TEST(DispatchKey, BackendAndAutogradKeysFollowDeviceTypes) {
  EXPECT_EQ(backend_key(DeviceType::CPU), K::CPU);
  EXPECT_EQ(backend_key(DeviceType::Sim), K::Sim);
  EXPECT_EQ(backend_key(DeviceType::CUDA), K::CUDA);
  EXPECT_EQ(autograd_key(DeviceType::CPU), K::AutogradCPU);
  EXPECT_EQ(autograd_key(DeviceType::Sim), K::AutogradSim);
  EXPECT_EQ(autograd_key(DeviceType::CUDA), K::AutogradCUDA);
  EXPECT_EQ(device_type_of(K::Sim), DeviceType::Sim);
  EXPECT_EQ(device_type_of(K::AutogradCUDA), DeviceType::CUDA);
  EXPECT_EQ(device_type_of(K::Tracing), std::nullopt);
  EXPECT_EQ(device_type_of(K::AutogradOther), std::nullopt);
  EXPECT_TRUE(is_backend_key(K::CUDA));
  EXPECT_FALSE(is_backend_key(K::BackendSelect));
  EXPECT_TRUE(is_autograd_key(K::AutogradOther));
  EXPECT_FALSE(is_autograd_key(K::Tracing));
}

TEST(DispatchKey, NamesRoundTrip) {
  for (int i = 0; i < kNumDispatchKeys; ++i) {
    const auto k = static_cast<DispatchKey>(i);
    EXPECT_EQ(parse_dispatch_key(dispatch_key_name(k)), k);
  }
  EXPECT_EQ(dispatch_key_name(K::AutogradSim), "AutogradSim");
  try {
    parse_dispatch_key("Autograd");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("\"Autograd\""), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("AutogradCPU"), std::string::npos) << e.what();
  }
}

TEST(DispatchKeySet, SetAlgebra) {
  const DispatchKeySet a{K::CPU, K::AutogradCPU};
  const DispatchKeySet b{K::AutogradCPU, K::Tracing};
  EXPECT_EQ(a | b, DispatchKeySet({K::CPU, K::AutogradCPU, K::Tracing}));
  EXPECT_EQ(a & b, DispatchKeySet(K::AutogradCPU));
  EXPECT_EQ(a - b, DispatchKeySet(K::CPU));
  EXPECT_EQ(a.add(K::Sim), DispatchKeySet({K::CPU, K::Sim, K::AutogradCPU}));
  EXPECT_EQ(a.remove(K::CPU), DispatchKeySet(K::AutogradCPU));
  EXPECT_EQ(a.remove(K::CUDA), a);  // removing an absent key changes nothing
  EXPECT_TRUE(a.has(K::CPU));
  EXPECT_FALSE(a.has(K::Sim));
  EXPECT_TRUE(a.has_any(b));
  EXPECT_FALSE(a.has_all(b));
  EXPECT_TRUE((a | b).has_all(b));
  EXPECT_EQ(a.size(), 2);
  EXPECT_TRUE(DispatchKeySet().empty());
  EXPECT_EQ(DispatchKeySet::full().size(), kNumDispatchKeys - 1);
  EXPECT_EQ(DispatchKeySet::from_raw(~uint64_t{0}), DispatchKeySet::full());
}

TEST(DispatchKeySet, UndefinedIsNoMember) {
  EXPECT_TRUE(DispatchKeySet(K::Undefined).empty());
  EXPECT_FALSE(DispatchKeySet::full().has(K::Undefined));
  EXPECT_EQ(DispatchKeySet(K::CPU).add(K::Undefined), DispatchKeySet(K::CPU));
}

TEST(DispatchKeySet, RemoveAboveKeepsOnlyLowerKeys) {
  const DispatchKeySet ks{K::CPU, K::Sim, K::AutogradCPU, K::AutogradSim, K::Tracing};
  EXPECT_EQ(ks.remove_above(K::Tracing), ks.remove(K::Tracing));
  EXPECT_EQ(ks.remove_above(K::AutogradCPU), DispatchKeySet({K::CPU, K::Sim}));
  EXPECT_EQ(ks.remove_above(K::Sim), DispatchKeySet(K::CPU));
  EXPECT_EQ(ks.remove_above(K::CPU), DispatchKeySet());
  EXPECT_EQ(DispatchKeySet::below(K::BackendSelect), DispatchKeySet::backends());
  EXPECT_EQ(DispatchKeySet::below(K::Undefined), DispatchKeySet());
}

TEST(DispatchKeySet, IteratesFromLowestToHighestPriority) {
  const DispatchKeySet ks{K::Tracing, K::CPU, K::AutogradSim};
  std::vector<DispatchKey> keys(ks.begin(), ks.end());
  EXPECT_EQ(keys, (std::vector<DispatchKey>{K::CPU, K::AutogradSim, K::Tracing}));
  EXPECT_EQ(std::vector<DispatchKey>(DispatchKeySet().begin(), DispatchKeySet().end()).size(), 0u);
  int n = 0;
  for (DispatchKey k : DispatchKeySet::full()) {
    EXPECT_EQ(static_cast<int>(k), n + 1);
    ++n;
  }
  EXPECT_EQ(n, kNumDispatchKeys - 1);
}

TEST(DispatchKeySet, Prints) {
  EXPECT_EQ(DispatchKeySet({K::AutogradCPU, K::CPU}).str(), "DispatchKeySet(CPU, AutogradCPU)");
  EXPECT_EQ(DispatchKeySet().str(), "DispatchKeySet()");
  std::ostringstream out;
  out << DispatchKeySet(K::Tracing) << " " << K::Sim;
  EXPECT_EQ(out.str(), "DispatchKeySet(Tracing) Sim");
}

TEST(DispatchKeySet, IsConstexpr) {
  constexpr DispatchKeySet ks = DispatchKeySet{K::CPU, K::Tracing}.remove(K::Tracing) | K::Sim;
  static_assert(ks.highest_priority_key() == K::Sim);
  static_assert(ks.size() == 2);
  static_assert(*ks.begin() == K::CPU);
  SUCCEED();
}

TEST(KeyExtraction, TensorKeysComeFromDeviceAndRequiresGrad) {
  EXPECT_EQ(key_set_of(tensor_on(Device("cpu"))), DispatchKeySet(K::CPU));
  EXPECT_EQ(key_set_of(tensor_on(Device("sim:0"))), DispatchKeySet(K::Sim));
  EXPECT_EQ(key_set_of(tensor_on(Device("cuda:1"))), DispatchKeySet(K::CUDA));
  EXPECT_EQ(key_set_of(tensor_on(Device("cpu"), true)), DispatchKeySet({K::CPU, K::AutogradCPU}));
  EXPECT_EQ(key_set_of(tensor_on(Device("sim:1"), true)), DispatchKeySet({K::Sim, K::AutogradSim}));
  EXPECT_EQ(key_set_of(tensor_on(Device("cuda:0"), true)),
            DispatchKeySet({K::CUDA, K::AutogradCUDA}));
  EXPECT_EQ(key_set_of(Tensor()), DispatchKeySet());
}

TEST(KeyExtraction, ArgumentPacksUnionTheirTensors) {
  Tensor cpu = tensor_on(Device("cpu"));
  Tensor sim = tensor_on(Device("sim:0"), true);
  Tensor cuda = tensor_on(Device("cuda:0"));
  const Tensor& cref = cpu;
  Tensor& ref = sim;
  EXPECT_EQ(key_set_of_args(cref, int64_t{3}, 2.5, true), DispatchKeySet(K::CPU));
  EXPECT_EQ(key_set_of_args(ref, cref), DispatchKeySet({K::CPU, K::Sim, K::AutogradSim}));
  EXPECT_EQ(key_set_of_args(std::optional<Tensor>(cuda)), DispatchKeySet(K::CUDA));
  EXPECT_EQ(key_set_of_args(std::optional<Tensor>()), DispatchKeySet());
  EXPECT_EQ(key_set_of_args(std::vector<Tensor>{cpu, cuda}), DispatchKeySet({K::CPU, K::CUDA}));
  const std::vector<Tensor> list{sim, Tensor()};
  EXPECT_EQ(key_set_of_args(ArrayRef<Tensor>(list)), DispatchKeySet({K::Sim, K::AutogradSim}));
  EXPECT_EQ(key_set_of_args(Tensor(), Scalar(1.0), Device("cuda:0")), DispatchKeySet());
  EXPECT_EQ(key_set_of_args(), DispatchKeySet());
}

TEST(LocalKeySets, StartEmpty) {
  std::thread([] {
    EXPECT_EQ(local_dispatch_key_set().included, DispatchKeySet());
    EXPECT_EQ(local_dispatch_key_set().excluded, DispatchKeySet());
  }).join();
}

TEST(LocalKeySets, CallKeySetAddsIncludedAndRemovesExcluded) {
  Tensor cpu = tensor_on(Device("cpu"), true);
  EXPECT_EQ(dispatch_key_set_of(cpu), DispatchKeySet({K::CPU, K::AutogradCPU, K::BackendSelect}));
  IncludeDispatchKeyGuard include(DispatchKeySet({K::Tracing, K::Sim}));
  EXPECT_EQ(dispatch_key_set_of(cpu),
            DispatchKeySet({K::CPU, K::Sim, K::AutogradCPU, K::BackendSelect, K::Tracing}));
  ExcludeDispatchKeyGuard exclude(DispatchKeySet({K::AutogradCPU, K::Sim}));
  // A key both included and excluded is excluded.
  EXPECT_EQ(dispatch_key_set_of(cpu), DispatchKeySet({K::CPU, K::BackendSelect, K::Tracing}));
}

TEST(LocalKeySets, GuardsNestAndRestore) {
  const LocalDispatchKeySet before = local_dispatch_key_set();
  {
    IncludeDispatchKeyGuard outer(K::Tracing);
    EXPECT_TRUE(local_dispatch_key_set().included.has(K::Tracing));
    {
      IncludeDispatchKeyGuard same(K::Tracing);  // already there: adds nothing, removes nothing
      IncludeDispatchKeyGuard inner(K::Sim);
      EXPECT_EQ(local_dispatch_key_set().included, DispatchKeySet({K::Sim, K::Tracing}));
      ExcludeDispatchKeyGuard ex1(K::AutogradCPU);
      ExcludeDispatchKeyGuard ex2(DispatchKeySet({K::AutogradCPU, K::CPU}));
      EXPECT_EQ(local_dispatch_key_set().excluded, DispatchKeySet({K::CPU, K::AutogradCPU}));
    }
    EXPECT_EQ(local_dispatch_key_set().included, DispatchKeySet(K::Tracing));
    EXPECT_EQ(local_dispatch_key_set().excluded, DispatchKeySet());
  }
  EXPECT_EQ(local_dispatch_key_set(), before);
}

TEST(LocalKeySets, GuardsRestoreWhenUnwinding) {
  const LocalDispatchKeySet before = local_dispatch_key_set();
  try {
    IncludeDispatchKeyGuard include(K::Tracing);
    ExcludeDispatchKeyGuard exclude(K::AutogradSim);
    throw std::runtime_error("boom");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(local_dispatch_key_set(), before);
}

TEST(LocalKeySets, AreThreadLocal) {
  IncludeDispatchKeyGuard include(K::Tracing);
  std::thread([] { EXPECT_FALSE(local_dispatch_key_set().included.has(K::Tracing)); }).join();
  EXPECT_TRUE(local_dispatch_key_set().included.has(K::Tracing));
}

TEST(LocalKeySets, ForceGuardSetsAndRestoresBoth) {
  IncludeDispatchKeyGuard include(K::Sim);
  const LocalDispatchKeySet before = local_dispatch_key_set();
  {
    ForceDispatchKeyGuard force({DispatchKeySet(K::Tracing), DispatchKeySet(K::CPU)});
    EXPECT_EQ(local_dispatch_key_set().included, DispatchKeySet(K::Tracing));
    EXPECT_EQ(local_dispatch_key_set().excluded, DispatchKeySet(K::CPU));
  }
  EXPECT_EQ(local_dispatch_key_set(), before);
}

}  // namespace
}  // namespace ferry
