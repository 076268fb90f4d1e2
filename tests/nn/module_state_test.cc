// Module state: state_dict (order, detached, non-persistent buffers left out), load_state_dict
// (across devices and dtypes, PyTorch's strict errors, nothing copied on error, strict=false),
// and Module::load from a safetensors file (on the host, straight to a sim device, converting
// dtypes, with the module's own errors, under chaos).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ferry/nn/safetensors.h"
#include "tests/memory/memory_fixture.h"
#include "tests/nn/module_test_modules.h"
#include "tests/nn/safetensors_test_util.h"
#include "tests/support/errors.h"
#include "tests/support/random.h"
#include "tests/support/tensor_compare.h"

namespace ferry::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class ModuleStateTest : public MemoryTest {};

void expect_same_state(const nn::Module& a, const nn::Module& b, double tol = 0) {
  const TensorDict sa = a.state_dict();
  const TensorDict sb = b.state_dict();
  ASSERT_EQ(sa.keys(), sb.keys());
  for (const auto& item : sa) {
    EXPECT_ALL_CLOSE(item.value().to(kFloat64).cpu(), sb[item.key()].to(kFloat64).cpu(), tol, tol)
        << item.key();
  }
}

TEST_F(ModuleStateTest, StateDictOrderAndContents) {
  Net net;
  const TensorDict sd = net->state_dict();
  EXPECT_THAT(sd.keys(),
              ElementsAre("fc1.weight", "fc1.bias", "norm.weight", "norm.bias", "norm.running_mean",
                          "norm.running_var", "norm.num_batches_tracked", "fc2.weight"));
  EXPECT_FALSE(sd["fc1.weight"].requires_grad());
  EXPECT_TRUE(sd["fc1.weight"].is_alias_of(net->fc1->weight));
  EXPECT_THAT(net->state_dict("model").keys().front(), "model.fc1.weight");
}

TEST_F(ModuleStateTest, LoadStateDictConvertsAcrossDevicesAndDtypes) {
  Net source;
  Net target;
  target->to(kSim0, kBFloat16);
  TensorDict sd = source->state_dict();
  for (auto& item : sd) item.value() = item.value().to(kFloat64);
  const nn::LoadStateDictResult r = target->load_state_dict(sd);
  EXPECT_TRUE(r.missing_keys.empty());
  EXPECT_TRUE(r.unexpected_keys.empty());
  EXPECT_EQ(target->fc1->weight.device(), kSim0);
  EXPECT_EQ(target->fc1->weight.dtype(), kBFloat16);
  EXPECT_EQ(target->norm->num_batches_tracked.dtype(), kInt64);
  expect_same_state(*source, *target, 1e-2);
}

TEST_F(ModuleStateTest, StrictErrorsListEverythingAndCopyNothing) {
  Net source;
  Net target;
  TensorDict sd = source->state_dict();
  sd.erase("fc2.weight");
  sd.erase("norm.bias");
  sd.insert("extra.weight", ones({1}));
  sd.insert_or_assign("fc1.bias", ones({9}));
  const Tensor before = target->fc1->weight.clone();
  const std::string message = error_of([&] { target->load_state_dict(sd); });
  EXPECT_THAT(message,
              HasSubstr("Error(s) in loading state_dict for Net:\n"
                        "\tMissing key(s) in state_dict: \"norm.bias\", \"fc2.weight\". \n"
                        "\tUnexpected key(s) in state_dict: \"extra.weight\". \n"
                        "\tsize mismatch for fc1.bias: copying a param with shape [9] from "
                        "checkpoint, the shape in current model is [8]."));
  EXPECT_ALL_CLOSE(target->fc1->weight, before, 0, 0);  // nothing was copied

  // Not strict: missing and unexpected keys are reported, size mismatches still raise.
  EXPECT_THAT(error_of([&] { target->load_state_dict(sd, /*strict=*/false); }),
              HasSubstr("size mismatch for fc1.bias"));
  sd.insert_or_assign("fc1.bias", source->fc1->bias.detach());
  const nn::LoadStateDictResult r = target->load_state_dict(sd, /*strict=*/false);
  EXPECT_THAT(r.missing_keys, ElementsAre("norm.bias", "fc2.weight"));
  EXPECT_THAT(r.unexpected_keys, ElementsAre("extra.weight"));
  EXPECT_ALL_CLOSE(target->fc1->weight, source->fc1->weight, 0, 0);
}

TEST_F(ModuleStateTest, NonPersistentBuffersAreNotInTheStateDict) {
  Net net;
  EXPECT_FALSE(net->state_dict().contains("norm.scratch"));
  TensorDict sd = net->state_dict();
  sd.insert("norm.scratch", ones({8}));
  EXPECT_THAT(error_of([&] { net->load_state_dict(sd); }),
              HasSubstr("Unexpected key(s) in state_dict: \"norm.scratch\""));
}

TEST_F(ModuleStateTest, LoadsASafetensorsFileOnTheHostAndOnADevice) {
  Net source;
  source->norm->num_batches_tracked.fill_(7);
  const std::string path = scratch_path("net.safetensors");
  safetensors::save(path, source->state_dict());

  Net host;
  host->load(path);
  expect_same_state(*source, *host);

  Net dev;
  const Tensor w = dev->fc1->weight;
  dev->load(path, kSim0);
  EXPECT_TRUE(dev->fc1->weight.is_same(w));
  EXPECT_EQ(w.device(), kSim0);
  EXPECT_EQ(dev->norm->scratch.device(), kSim0) << "non-persistent buffers move too";
  EXPECT_ALL_CLOSE(dev->norm->scratch.cpu(), full({8}, 5.0), 0, 0);
  expect_same_state(*source, *dev);

  // A module in another dtype, non-contiguous tensors: staged and converted on the device.
  Net converted;
  converted->to(kSim1, kFloat64);
  converted->fc2->weight.set_data(empty({3, 8}, TensorOptions(kFloat64).device(kSim1)).t().t());
  converted->load(path, std::nullopt, true, {.non_blocking = true});
  expect_same_state(*source, *converted, 1e-7);
}

TEST_F(ModuleStateTest, LoadFromAFileErrorsLikeLoadStateDict) {
  TensorDict sd;
  sd.insert("fc1.weight", ones({8, 4}));
  sd.insert("junk", ones({2}));
  const std::string path = scratch_path("partial.safetensors");
  safetensors::save(path, sd);
  Net net;
  const Tensor bias = net->fc1->bias.clone();
  const std::string message = error_of([&] { net->load(path, kSim0); });
  EXPECT_THAT(message, HasSubstr("Error(s) in loading state_dict for Net:\n\tMissing key(s) in "
                                 "state_dict: \"fc1.bias\""));
  EXPECT_THAT(message, HasSubstr("Unexpected key(s) in state_dict: \"junk\". "));
  EXPECT_EQ(net->fc1->weight.device(), Device(DeviceType::CPU)) << "a failed load moves nothing";
  const nn::LoadStateDictResult r = net->load(path, kSim0, /*strict=*/false);
  EXPECT_THAT(r.unexpected_keys, ElementsAre("junk"));
  EXPECT_EQ(r.missing_keys.size(), 7u);
  EXPECT_ALL_CLOSE(net->fc1->weight.cpu(), ones({8, 4}), 0, 0);
  EXPECT_ALL_CLOSE(net->fc1->bias.cpu(), bias, 0, 0) << "entries missing from the file move";
}

TEST_F(ModuleStateTest, LoadToADeviceUnderChaos) {
  sim::SimConfig c = default_sim_config();
  c.chaos_seed = test_seed();
  c.chaos_max_delay = std::chrono::microseconds(300);
  sim::configure(c);
  SCOPED_TRACE(seed_trace());
  Net source;
  const std::string path = scratch_path("chaos.safetensors");
  safetensors::save(path, source->state_dict());
  for (bool non_blocking : {false, true}) {
    Net net;
    safetensors::LoadOptions o{
        .staging_chunks = 2, .chunk_bytes = 4096, .non_blocking = non_blocking};
    net->load(path, kSim0, true, o);
    const Tensor x = randn({6, 4});
    EXPECT_ALL_CLOSE(net(x.to(kSim0)).cpu(), source(x), 1e-5, 1e-5);
  }
}

}  // namespace
}  // namespace ferry::testing
