// Module moves: to(device), to(dtype), to(device, dtype), cpu, to_empty, cuda. Parameters stay
// the same objects, .grad moves with them, integer buffers keep their dtype, shared tensors stay
// shared; the planned transfer packs small tensors, and a non-blocking move from pinned memory
// returns before its copies run while the module is safe to use on the stream (chaos on).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ferry/nn/transfer.h"
#include "tests/memory/memory_fixture.h"
#include "tests/nn/module_test_modules.h"
#include "tests/support/errors.h"
#include "tests/support/random.h"
#include "tests/support/tensor_compare.h"

namespace ferry::testing {
namespace {

using ::testing::HasSubstr;

class ModuleToTest : public MemoryTest {};

std::vector<Tensor> host_copies(const std::vector<Tensor>& ts) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(t.cpu().clone());
  return out;
}

TEST_F(ModuleToTest, ToDeviceKeepsEveryTensorObjectAndItsValues) {
  Net net;
  net(randn({2, 4})).sum().backward();
  const std::vector<Tensor> params = net->parameters();
  const std::vector<Tensor> buffers = net->buffers();
  const std::vector<Tensor> values = host_copies(params);
  const Tensor grad = net->fc1->weight.grad();
  const Tensor grad_value = grad.clone();
  const Tensor held = net->fc1->weight;  // what an optimizer would hold

  net->to(kSim0);
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(net->parameters()[i].is_same(params[i])) << "a parameter was replaced";
    EXPECT_EQ(params[i].device(), kSim0);
    EXPECT_TRUE(params[i].requires_grad());
    EXPECT_TRUE(params[i].is_leaf());
    EXPECT_ALL_CLOSE(params[i], values[i], 0, 0);
  }
  for (const Tensor& b : buffers) EXPECT_EQ(b.device(), kSim0);
  EXPECT_EQ(held.device(), kSim0);
  EXPECT_TRUE(net->fc1->weight.grad().is_same(grad)) << ".grad stays the same object";
  EXPECT_EQ(grad.device(), kSim0);
  EXPECT_ALL_CLOSE(grad, grad_value, 0, 0);

  // A forward and backward on the device work with the moved module.
  const Tensor x = randn({3, 4});
  const Tensor expected = Net(net.ptr())(x.to(kSim0)).cpu();
  net->cpu();
  EXPECT_EQ(held.device(), Device(DeviceType::CPU));
  EXPECT_ALL_CLOSE(net(x), expected, 1e-6, 1e-6);
}

TEST_F(ModuleToTest, ToDtypeCastsFloatingTensorsOnly) {
  Net net;
  net(randn({2, 4})).sum().backward();
  net->to(kFloat64);
  for (const Tensor& p : net->parameters()) EXPECT_EQ(p.dtype(), kFloat64);
  EXPECT_EQ(net->fc1->weight.grad().dtype(), kFloat64);
  EXPECT_EQ(net->norm->running_mean.dtype(), kFloat64);
  EXPECT_EQ(net->norm->num_batches_tracked.dtype(), kInt64);
  net->to(kSim1, kBFloat16);
  EXPECT_EQ(net->fc1->weight.dtype(), kBFloat16);
  EXPECT_EQ(net->fc1->weight.device(), kSim1);
  EXPECT_EQ(net->norm->num_batches_tracked.dtype(), kInt64);
  EXPECT_EQ(net->norm->num_batches_tracked.device(), kSim1);
  EXPECT_THAT(error_of<DTypeError>([&] { net->to(kInt32); }),
              HasSubstr("Module::to only accepts floating point or complex dtypes, but got "
                        "desired dtype=Int32"));
}

TEST_F(ModuleToTest, SharedTensorsStaySharedAndMoveOnce) {
  auto root = std::make_shared<nn::Module>("Root");
  auto a = root->register_module("a", LinearLike(3, 3));
  auto tied = std::make_shared<nn::Module>("Tied");
  tied->register_parameter("weight", a->weight);
  root->register_module("tied", tied);
  root->to(kSim0);
  EXPECT_TRUE(tied->own_parameters()["weight"].is_same(a->weight));
  EXPECT_EQ(a->weight.device(), kSim0);
}

TEST_F(ModuleToTest, ToEmptyAndCudaAndUndefinedSlots) {
  Net net;
  const Tensor w = net->fc1->weight;
  net->to_empty(kSim0);
  EXPECT_TRUE(net->fc1->weight.is_same(w));
  EXPECT_EQ(w.device(), kSim0);
  EXPECT_FALSE(net->fc2->own_parameters()["bias"].defined());
  if (device_count(DeviceType::CUDA) == 0) {
    EXPECT_THROW(net->cuda(), DeviceError);
    EXPECT_EQ(w.device(), kSim0) << "a failed move changes nothing";
  }
}

TEST_F(ModuleToTest, SmallTensorsArePackedIntoOneCopy) {
  std::vector<nn::CopyPair> pairs;
  std::vector<Tensor> sources;
  for (int i = 0; i < 50; ++i) {
    Tensor src = randn({i % 5 + 1, 7});
    if (i % 3 == 0) src = src.t();          // non-contiguous
    if (i % 7 == 0) src = src._neg_view();  // a lazy bit
    const ScalarType to = i % 2 == 0 ? kFloat32 : kFloat16;
    pairs.push_back({empty(src.sizes(), TensorOptions(to).device(kSim0)), src});
    sources.push_back(src);
  }
  const Tensor big = randn({1024, 513}).t();  // 2 MiB, transposed: staged, then its own copy
  pairs.push_back({empty({513, 1024}, TensorOptions(kBFloat16).device(kSim0)), big});
  // Pinned and empty sources are copied directly.
  pairs.push_back({empty({64}, TensorOptions(kFloat32).device(kSim0)), randn({64}).pin_memory()});
  pairs.push_back({empty({0, 3}, TensorOptions(kFloat32).device(kSim0)), randn({0, 3})});
  const nn::TransferReport r = nn::batched_copy(pairs, /*non_blocking=*/false);
  EXPECT_EQ(r.batches, 1) << "one staging buffer";
  EXPECT_EQ(r.staged_tensors, 50);
  EXPECT_EQ(r.packed_tensors, 50) << "the small ones cross together";
  EXPECT_EQ(r.direct_copies, 3) << "the large, the pinned and the empty one";
  EXPECT_EQ(r.synchronizations, 1);
  for (size_t i = 0; i < pairs.size(); ++i) {
    EXPECT_ALL_CLOSE(pairs[i].dst.to(kFloat32), pairs[i].src.to(kFloat32), 1e-2, 1e-2) << i;
  }
  // Staging the large one too: it is copied from its slot.
  for (const nn::CopyPair& p : pairs) Tensor(p.dst).zero_();
  const nn::TransferReport all = nn::batched_copy(pairs, false, {.stage_large_tensors = true});
  EXPECT_EQ(all.batches, 1);
  EXPECT_EQ(all.staged_tensors, 51);
  EXPECT_EQ(all.packed_tensors, 50);
  EXPECT_EQ(all.direct_copies, 3) << "the large one from its slot, the pinned and the empty one";
  for (size_t i = 0; i < pairs.size(); ++i) {
    EXPECT_ALL_CLOSE(pairs[i].dst.to(kFloat32), pairs[i].src.to(kFloat32), 1e-2, 1e-2) << i;
  }
  // A small batch limit splits the set; everything still arrives.
  for (const nn::CopyPair& p : pairs) Tensor(p.dst).zero_();
  const nn::TransferReport split = nn::batched_copy(
      pairs, false,
      {.small_tensor_bytes = 1 << 20, .max_batch_bytes = 512, .stage_large_tensors = true});
  EXPECT_GT(split.batches, 5);
  for (size_t i = 0; i < pairs.size(); ++i) {
    EXPECT_ALL_CLOSE(pairs[i].dst.to(kFloat32), pairs[i].src.to(kFloat32), 1e-2, 1e-2) << i;
  }
}

// to(non_blocking) from pinned memory returns while the stream is held shut, and work queued on
// the stream afterwards sees the moved values; with pageable sources the packed batch is queued
// the same way. Chaos delays every queued operation.
TEST_F(ModuleToTest, NonBlockingMoveIsSafeOnTheCurrentStreamUnderChaos) {
  sim::SimConfig c = default_sim_config();
  c.chaos_seed = test_seed();
  c.chaos_max_delay = std::chrono::microseconds(500);
  sim::configure(c);
  SCOPED_TRACE(seed_trace());
  for (bool pinned : {true, false}) {
    SCOPED_TRACE(pinned ? "pinned" : "pageable");
    Net net;
    if (pinned) {
      for (const Tensor& t : net->parameters()) t.set_data(t.pin_memory());
      for (const Tensor& t : net->buffers()) t.set_data(t.pin_memory());
    }
    const std::vector<Tensor> values = host_copies(net->parameters());
    const Stream stream = current_stream(kSim0);
    std::vector<Tensor> sums;
    {
      StreamGate gate(stream);
      net->to(kSim0, /*non_blocking=*/true);  // returns: nothing waits for the gate
      for (const Tensor& p : net->parameters()) sums.push_back(p.sum());
      EXPECT_FALSE(stream.query()) << "the copies ran before the gate opened";
      // The host frees its old tensors at once; the queued copies keep the pinned blocks.
      for (int i = 0; i < 4; ++i) (void)full({64}, -1.0f, TensorOptions().pinned_memory(true));
    }
    for (size_t i = 0; i < values.size(); ++i) {
      EXPECT_NEAR(sums[i].item<double>(), values[i].sum().item<double>(), 1e-4) << i;
    }
  }
}

TEST_F(ModuleToTest, NonBlockingMoveToTheHostLandsInPinnedMemory) {
  Net net;
  net->to(kSim0);
  const Tensor w = net->fc1->weight;
  const Tensor value = w.cpu();
  net->to(Device(DeviceType::CPU), /*non_blocking=*/true);
  EXPECT_TRUE(w.is_pinned());
  current_stream(kSim0).synchronize();
  EXPECT_ALL_CLOSE(w, value, 0, 0);
  net->to(kSim0);
  net->to(Device(DeviceType::CPU));
  EXPECT_FALSE(w.is_pinned());
  EXPECT_ALL_CLOSE(w, value, 0, 0);
}

}  // namespace
}  // namespace ferry::testing
