// ferry's operators against PyTorch 1.13, forward and backward, on random inputs (the run's seed
// is printed; FERRY_TEST_SEED replays it): one test per operator and device (cpu, sim:0, sim:0
// with chaos for each operator's first case). An operator this build lacks is skipped by name;
// without /usr/bin/python3 or torch every test is skipped with the reason (docs/ops.md).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <tuple>

#include "ferry/backends/sim/sim.h"
#include "ferry/device/runtime.h"
#include "ferry/dispatch/dispatcher.h"
#include "ferry/ops/factories.h"
#include "ferry/ops/math.h"
#include "tests/reference/reference_harness.h"
#include "tests/support/errors.h"
#include "tests/support/random.h"
#include "tests/support/tensor_compare.h"

namespace ferry::reference {
namespace {

using Param = std::tuple<std::string, Mode>;

std::vector<std::string> op_names() {
  std::vector<std::string> names;
  for (const auto& [name, entry] : op_table()) names.push_back(name);
  return names;
}

// Chaos on the sim for the scope: queued work is delayed at random (a missing stream
// synchronization then shows up as wrong values or a TSan report).
class SimChaos {
 public:
  explicit SimChaos(uint64_t seed) : saved_(sim::config()) {
    sim::SimConfig c = saved_;
    c.chaos_seed = seed;
    c.chaos_max_delay = std::chrono::microseconds(200);
    sim::configure(c);
  }
  SimChaos(const SimChaos&) = delete;
  SimChaos& operator=(const SimChaos&) = delete;
  ~SimChaos() { sim::configure(saved_); }

 private:
  sim::SimConfig saved_;
};

class TorchReference : public ::testing::TestWithParam<Param> {};

TEST_P(TorchReference, MatchesPyTorch) {
  const auto& [op, mode] = GetParam();
  const ReferenceRun& run = reference_run();
  if (!run.skip_reason.empty()) GTEST_SKIP() << run.skip_reason;
  ASSERT_TRUE(run.failure.empty()) << run.failure;
  const std::vector<nlohmann::json> cases = run.cases_of(op);
  if (cases.empty()) GTEST_SKIP() << "no cases of " << op << " in this run (FERRY_REFERENCE_ONLY)";
  const OpEntry& entry = op_table().at(op);
  if (!Dispatcher::singleton().try_find(entry.ferry_op)) {
    GTEST_SKIP() << entry.ferry_op << " is not registered in this build: " << cases.size()
                 << " case(s) of '" << op << "' skipped";
  }
  if (mode != Mode::kCpu && device_count(DeviceType::Sim) == 0) {
    GTEST_SKIP() << "no sim device (FERRY_SIM_DEVICES=0)";
  }
  SCOPED_TRACE(testing::seed_trace());
  std::optional<SimChaos> chaos;
  if (mode == Mode::kSimChaos) chaos.emplace(testing::test_seed());
  int ran = 0, known = 0;
  std::vector<std::string> missing;
  for (const nlohmann::json& c : cases) {
    if (mode == Mode::kSimChaos && !c.value("chaos", false)) continue;
    const CaseResult r = check_case(run, c, entry, mode);
    if (!r.missing_kernel.empty()) {
      missing.push_back(c["name"].get<std::string>() + " (" + r.missing_kernel + ")");
      continue;
    }
    ++ran;
    const KnownDifference* k = known_difference(c["name"].get<std::string>(), mode);
    if (k != nullptr && r.failures.empty() && k->pattern.find('*') == std::string::npos) {
      ADD_FAILURE() << r.label << ": listed in known_differences.cc (" << k->why
                    << "), but it now agrees with PyTorch: remove it from the list";
    }
    bool counted = false;
    for (const std::string& f : r.failures) {
      if (k != nullptr && f.find(k->text) != std::string::npos) {
        known += counted ? 0 : 1;
        counted = true;
      } else {
        ADD_FAILURE() << r.label << ":\n  " << f;
      }
    }
  }
  RecordProperty("cases", ran);
  if (known)
    std::printf("%s: %d case(s) differ as listed in known_differences.cc\n", op.c_str(), known);
  if (!missing.empty()) {
    std::string list;
    for (const std::string& m : missing) list += "\n  " + m;
    if (ran == 0) GTEST_SKIP() << "kernels not in this build:" << list;
    std::printf("%s: %zu case(s) skipped, kernels not in this build:%s\n", op.c_str(),
                missing.size(), list.c_str());
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, TorchReference,
                         ::testing::Combine(::testing::ValuesIn(op_names()),
                                            ::testing::Values(Mode::kCpu, Mode::kSim,
                                                              Mode::kSimChaos)),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           return std::get<0>(info.param) + "_" +
                                  mode_name(std::get<1>(info.param));
                         });

// Adding an operator is one entry on each side; this keeps the two tables in step.
TEST(TorchReferenceTables, EveryOperatorHasAnEntryOnBothSides) {
  const ReferenceRun& run = reference_run();
  if (!run.skip_reason.empty()) GTEST_SKIP() << run.skip_reason;
  ASSERT_TRUE(run.failure.empty()) << run.failure;
  std::set<std::string> python;
  for (const auto& name : run.manifest["ops"]) python.insert(name.get<std::string>());
  for (const std::string& name : python) {
    EXPECT_TRUE(op_table().count(name)) << "'" << name << "' has cases in the Python table "
                                        << "but no entry in tests/reference/op_table.cc";
  }
  for (const auto& [name, entry] : op_table()) {
    EXPECT_TRUE(python.count(name)) << "'" << name << "' has a C++ entry but no Python cases";
  }
}

// What this build compares and what it skips, printed once (ctest -V shows it).
TEST(TorchReferenceTables, ListsTheOperatorsThisBuildLacks) {
  const ReferenceRun& run = reference_run();
  if (!run.skip_reason.empty()) GTEST_SKIP() << run.skip_reason;
  std::string missing;
  int present = 0;
  for (const auto& [name, entry] : op_table()) {
    if (Dispatcher::singleton().try_find(entry.ferry_op)) {
      ++present;
    } else {
      missing += " " + name;
    }
  }
  std::printf("torch reference: %d operators compared; not registered in this build:%s\n", present,
              missing.empty() ? " none" : missing.c_str());
}

// boxed() fills a schema's arguments by name, from the case's inputs and parameters, then from
// the entry's defaults, then from the schema's; it is what calls the linear-algebra and NN
// operators until they have front-ends, so it is checked here on operators that exist.
TEST(TorchReferenceTables, BoxedCallsFillArgumentsByName) {
  const Tensor a = ferry::arange(6, TensorOptions(kFloat32)).view({2, 3});
  const Tensor b = ferry::full({3}, 2.0);
  nlohmann::json params = {{"alpha", 3}};
  std::vector<Tensor> out = boxed("ferry::add.Tensor").fn(Call({a, b}, {"self", "other"}, params));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_ALL_CLOSE(out[0], ferry::add(a, b, 3));

  params = {{"dim", -1}, {"dtype", "float64"}};  // one int for int[], a dtype name
  out = boxed("ferry::sum.dim_IntList").fn(Call({a}, {"self"}, params));
  EXPECT_EQ(out[0].dtype(), kFloat64);
  EXPECT_ALL_CLOSE(out[0], ferry::sum(a, {1}, false, kFloat64));

  params = nlohmann::json::object();  // the schema's default: approximate='none'
  out = boxed("ferry::gelu").fn(Call({a}, {"self"}, params));
  EXPECT_ALL_CLOSE(out[0], ferry::gelu(a));
  params = {{"approximate", "tanh"}};
  out = boxed("ferry::gelu", {{"approximate", "none"}}).fn(Call({a}, {"self"}, params));
  EXPECT_ALL_CLOSE(out[0], ferry::gelu(a, "tanh"));
  params = nlohmann::json::object();  // the entry's default beats the schema's
  out = boxed("ferry::gelu", {{"approximate", "tanh"}}).fn(Call({a}, {"self"}, params));
  EXPECT_ALL_CLOSE(out[0], ferry::gelu(a, "tanh"));

  params = {{"dim", nullptr}};  // int? as None
  out = boxed("ferry::argmax").fn(Call({a}, {"self"}, params));
  EXPECT_EQ(out[0].item<int64_t>(), 5);

  // Mistakes in a case are CaseErrors (a broken case table), never ferry errors.
  params = {{"alpah", 2}};
  EXPECT_THAT(testing::error_of<CaseError>([&] {
                boxed("ferry::add.Tensor").fn(Call({a, b}, {"self", "other"}, params));
              }),
              ::testing::HasSubstr("parameter 'alpah' is no argument of ferry::add.Tensor"));
  params = nlohmann::json::object();
  EXPECT_THAT(testing::error_of<CaseError>([&] {
                boxed("ferry::add.Tensor").fn(Call({a, b}, {"self", "input"}, params));
              }),
              ::testing::HasSubstr("the case has no input 'other'"));
  EXPECT_THAT(testing::error_of<CaseError>(
                  [&] { boxed("ferry::no_such_op").fn(Call({a}, {"self"}, params)); }),
              ::testing::HasSubstr("ferry::no_such_op is not registered"));
}

}  // namespace
}  // namespace ferry::reference
