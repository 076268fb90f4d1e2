// The linear-algebra and nn operators on sim:0 give the CPU's values and gradients (the sim runs
// the CPU kernels on its stream workers, so they must agree to the last bit in float64), also
// with sim chaos delaying queued work at random (a missing stream synchronization in an
// operator or its backward would then show as a wrong value); gradcheck on sim; and a tiny MLP
// trained by SGD lowers its loss on both devices.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/device/sim_fixture.h"
#include "tests/nn/nn_ops_test_util.h"

namespace ferry::testing {
namespace {

using autograd::variable_list;

const Device kSim("sim:0");

// Each family of operators as a function of its inputs, with the inputs to run it on.
struct Workload {
  const char* name;
  Fn fn;
  variable_list inputs;
};

std::vector<Workload> workloads(std::mt19937_64& rng, ScalarType dtype) {
  auto u = [&](IntArrayRef sizes, double lo = -1, double hi = 1) {
    return leaf(uniform(rng, sizes, dtype, lo, hi));
  };
  std::vector<Workload> w;
  w.push_back({"linalg",
               [](const variable_list& in) -> variable_list {
                 const Tensor h = linear(in[0], in[1], in[2]).relu();
                 return {matmul(h, in[3]), addmm(in[2], in[4], in[1].t(), 0.5, 2.0),
                         bmm(in[3].unsqueeze(0).expand({2, 5, 3}), in[5])};
               },
               {u({2, 4, 6}), u({5, 6}), u({5}), u({5, 3}), u({3, 6}), u({2, 3, 2})}});
  w.push_back({"conv-pool",
               [](const variable_list& in) -> variable_list {
                 const Tensor x = in[0].contiguous(MemoryFormat::ChannelsLast);
                 const Tensor c = conv2d(x, in[1], in[2], 2, 1, 1, 2);
                 return {max_pool2d(c, 3, 2, 1, 1, true), avg_pool2d(c, 2, 1, 0, true, false),
                         adaptive_avg_pool2d(in[0], {3, 2})};
               },
               {u({2, 4, 7, 6}), u({6, 2, 3, 3}), u({6})}});
  w.push_back({"norm",
               [](const variable_list& in) -> variable_list {
                 Tensor rm = zeros({3}, in[0].options()), rv = ones({3}, in[0].options());
                 const Tensor t = batch_norm(in[0], in[1], in[2], rm, rv, true, 0.1, 1e-5);
                 const Tensor e = batch_norm(in[0], in[1], in[2], rm, rv, false, 0.1, 1e-5);
                 return {t, e, rm, rv, layer_norm(in[0], {4, 5}, in[3], std::nullopt)};
               },
               {u({2, 3, 4, 5}, -1, 2), u({3}), u({3}), u({4, 5})}});
  const Tensor target = indices_of(rng, {6}, 4);
  const Tensor idx = tensor_of({3, 0, 2, 2, 1}, {5}, kInt64);
  const Tensor class_weight = uniform(rng, {4}, dtype, 0.5, 2);
  w.push_back({"losses",
               [target, idx, class_weight](const variable_list& in) -> variable_list {
                 const Tensor t = target.to(in[0].device()), i = idx.to(in[0].device());
                 const Tensor cw = class_weight.to(in[0].device());
                 Generator gen(7);
                 const Tensor e = embedding(in[1], i, 2);
                 return {cross_entropy(in[0], t, cw, "mean", 1, 0.1),
                         nll_loss(in[0].log_softmax(1), t, std::nullopt, "none"),
                         mse_loss(e, in[2]),
                         dropout(in[0], 0.3, true, &gen),
                         cat({in[0], in[0].t().split(2, 0)[1].t()}, 1),
                         stack({e, in[2]}, 1)};
               },
               {u({6, 4}), u({4, 3}), u({5, 3})}});
  return w;
}

void run_all(ScalarType dtype, double rtol, double atol) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  for (const Workload& w : workloads(rng, dtype)) {
    SCOPED_TRACE(w.name);
    expect_same_on(kSim, w.fn, w.inputs, rtol, atol);
  }
}

class NnSimTest : public SimTest {};

TEST_F(NnSimTest, ValuesAndGradientsMatchTheCpu) {
  run_all(kFloat64, 0, 0);
  run_all(kFloat32, 0, 0);
  run_all(kBFloat16, 0, 0);
}

TEST_F(NnSimTest, GradcheckOnSim) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  auto on_sim = [&](IntArrayRef sizes) { return uniform(rng, sizes).to(kSim).requires_grad_(); };
  EXPECT_TRUE(grad_ok(
      [](const variable_list& in) -> variable_list {
        return {conv2d(in[0], in[1], in[2], 1, 1), linear(in[3], in[4])};
      },
      {on_sim({1, 2, 4, 3}), on_sim({3, 2, 2, 2}), on_sim({3}), on_sim({2, 3}), on_sim({4, 3})}));
  const Tensor target = indices_of(rng, {3}, 4).to(kSim);
  EXPECT_TRUE(grad_ok(
      [&](const variable_list& in) -> variable_list {
        return {cross_entropy(in[0], target, std::nullopt, "mean", -100, 0.2),
                layer_norm(in[0], {4}), max_pool2d(in[0].view({1, 1, 3, 4}), 2, 1)};
      },
      {on_sim({3, 4})}));
}

// Only the data can show an index out of range; on sim the stream worker finds it, and the next
// synchronization of the stream reports it (as a CUDA device-side assert would be).
TEST_F(NnSimTest, AnIndexOutOfRangeSurfacesAtTheNextSynchronization) {
  const Tensor w = ones({6, 3}, TensorOptions(kFloat32).device(kSim));
  const Tensor bad = full({2}, 6, TensorOptions(kInt64).device(kSim));
  EXPECT_THAT(error_of<DeviceError>([&] { embedding(w, bad).cpu(); }),
              ::testing::HasSubstr("index 6 is out of bounds: expected a value in [0, 6)"));
  const Tensor lp = zeros({2, 3}, TensorOptions(kFloat32).device(kSim));
  EXPECT_THAT(error_of<DeviceError>([&] { nll_loss(lp, bad).cpu(); }),
              ::testing::HasSubstr("index 6 is out of bounds"));
  // The stream carries on.
  EXPECT_EQ(embedding(w, zeros({2}, TensorOptions(kInt64).device(kSim))).sum().item<double>(), 6);
}

class NnChaosTest : public SimTest {
 protected:
  sim::SimConfig config() const override {
    sim::SimConfig c;
    c.chaos_seed = test_seed();
    c.chaos_max_delay = std::chrono::microseconds(300);
    return c;
  }
};

TEST_F(NnChaosTest, ValuesAndGradientsMatchTheCpuUnderChaos) {
  run_all(kFloat64, 0, 0);
  run_all(kFloat32, 0, 0);
}

// ---- a training step ---------------------------------------------------------------------------

// linear(8 -> 16) - relu - linear(16 -> 3) - cross_entropy, plain SGD; returns the losses.
std::vector<double> train_mlp(const Device& device, int steps) {
  std::mt19937_64 rng(1234);
  auto param = [&](IntArrayRef sizes, double scale) {
    return uniform(rng, sizes, kFloat32, -scale, scale).to(device).requires_grad_();
  };
  std::vector<Tensor> params = {param({16, 8}, 0.35), param({16}, 0.1), param({3, 16}, 0.25),
                                param({3}, 0.1)};
  const Tensor x = uniform(rng, {32, 8}, kFloat32).to(device);
  // A learnable labelling: the class of the largest of three fixed projections.
  const Tensor proj = uniform(rng, {8, 3}, kFloat32).to(device);
  const Tensor y = matmul(x, proj).argmax(1);
  std::vector<double> losses;
  for (int step = 0; step < steps; ++step) {
    const Tensor h = linear(x, params[0], params[1]).relu();
    const Tensor loss = cross_entropy(linear(h, params[2], params[3]), y);
    losses.push_back(loss.item<double>());
    loss.backward();
    NoGradGuard no_grad;
    for (Tensor& p : params) {
      p.sub_(p.grad() * 0.5);
      p.mutable_grad() = Tensor();
    }
  }
  return losses;
}

TEST_F(NnSimTest, TinyMlpTrainingLowersTheLossOnCpuAndSim) {
  const std::vector<double> cpu = train_mlp(Device(DeviceType::CPU), 30);
  const std::vector<double> sim = train_mlp(kSim, 30);
  EXPECT_LT(cpu.back(), 0.7 * cpu.front()) << ::testing::PrintToString(cpu);
  ASSERT_EQ(cpu.size(), sim.size());
  for (size_t i = 0; i < cpu.size(); ++i) EXPECT_FLOAT_EQ(sim[i], cpu[i]) << "step " << i;
}

}  // namespace
}  // namespace ferry::testing
