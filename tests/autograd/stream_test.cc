// Compute and autograd on the sim device, where kernels run later on stream workers: results
// equal the CPU's (also with chaos delaying queued work at random, so a missing wait would show
// as a wrong value), each node's backward runs on the stream its forward ran on, gradients cross
// streams and devices through event waits, nested backwards run inline, and errors raised in a
// device node reach the caller.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <thread>

#include "ferry/autograd/engine.h"
#include "ferry/autograd/function.h"
#include "ferry/autograd/grad_mode.h"
#include "ferry/ferry.h"
#include "tests/support/errors.h"
#include "tests/support/random.h"
#include "tests/support/tensor_compare.h"

namespace ferry {
namespace {

using testing::error_of;
using ::testing::HasSubstr;

class SimAutograd : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (device_count(DeviceType::Sim) < 2) GTEST_SKIP() << "needs 2 sim devices";
    sim::SimConfig c;
    if (GetParam()) {
      c.chaos_seed = testing::test_seed();
      c.chaos_max_delay = std::chrono::microseconds(200);
    }
    sim::configure(c);
  }
  void TearDown() override { sim::configure(sim::SimConfig{}); }
};

INSTANTIATE_TEST_SUITE_P(Chaos, SimAutograd, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Chaos" : "Plain"; });

TEST_P(SimAutograd, OperatorsGiveTheCpusValues) {
  SCOPED_TRACE(testing::seed_trace());
  Generator gen(testing::test_seed());
  const Tensor a = randn({5, 7}, kFloat32, &gen), b = randn({7}, kFloat32, &gen);
  const Device sim0("sim:0");
  const Tensor sa = a.to(sim0), sb = b.to(sim0);
  auto f = [](const Tensor& x, const Tensor& y) {
    return (x * y + x.exp().sigmoid() - y.abs().sqrt() / 3).relu().tanh() + x.gelu("tanh");
  };
  EXPECT_ALL_CLOSE(f(sa, sb), f(a, b), 1e-6, 1e-6);
  EXPECT_ALL_CLOSE(a.t().sum({1}), sa.t().sum({1}), 1e-6, 1e-6);
  EXPECT_ALL_CLOSE(a.mean({0}, true), sa.mean({0}, true), 1e-6, 1e-6);
  EXPECT_ALL_CLOSE(a.amax({1}), sa.amax({1}));
  EXPECT_ALL_CLOSE(a.argmax(1), sa.argmax(1));
  EXPECT_ALL_CLOSE(where(a.gt(0), a, b), where(sa.gt(0), sa, sb));
  Tensor inplace = sa.clone();
  inplace.mul_(2).add_(sb, 0.5).relu_();
  EXPECT_ALL_CLOSE(inplace, (a * 2 + b * 0.5).relu(), 1e-6, 1e-6);
}

TEST_P(SimAutograd, BackwardOnADeviceMatchesTheCpu) {
  SCOPED_TRACE(testing::seed_trace());
  Generator gen(testing::test_seed());
  const Tensor a = randn({4, 6}, kFloat64, &gen), b = randn({6}, kFloat64, &gen);
  auto run = [&](Device d) {
    Tensor x = a.to(d).detach().requires_grad_(), y = b.to(d).detach().requires_grad_();
    Tensor loss = ((x * y).tanh() + x.exp() / y.abs().add(1)).pow(2).mean();
    loss.backward();
    return std::pair{x.grad(), y.grad()};
  };
  const auto [gx, gy] = run(Device("cpu"));
  const auto [sgx, sgy] = run(Device("sim:0"));
  EXPECT_EQ(sgx.device(), Device("sim:0"));
  EXPECT_ALL_CLOSE(sgx, gx, 1e-12, 1e-12);
  EXPECT_ALL_CLOSE(sgy, gy, 1e-12, 1e-12);
  EXPECT_GE(autograd::Engine::get().num_device_threads(), 1);
}

TEST_P(SimAutograd, GradientsReturnAcrossDevices) {
  const Tensor a = arange(6, kFloat64).view({2, 3});
  Tensor x = a.to(Device("sim:0")).requires_grad_();
  Tensor y = x.to(Device("sim:1")) * 3;  // the copy's backward brings the gradient back
  (y * y).sum().backward();
  EXPECT_EQ(x.grad().device(), Device("sim:0"));
  EXPECT_ALL_CLOSE(x.grad(), a * 18);
}

// A custom function that remembers the stream its backward ran on.
std::mutex seen_mutex;
std::vector<Stream> seen_streams;

struct RecordStream : autograd::Function<RecordStream> {
  static Tensor forward(autograd::AutogradContext*, const Tensor& x) { return x * 1; }
  static autograd::variable_list backward(autograd::AutogradContext*,
                                          autograd::variable_list grads) {
    std::lock_guard<std::mutex> lock(seen_mutex);
    seen_streams.push_back(current_stream(grads[0].device()));
    return {grads[0]};
  }
};

TEST_P(SimAutograd, EachNodeRunsOnTheStreamItsForwardRanOn) {
  const Device sim0("sim:0");
  const Stream s1 = get_stream_from_pool(sim0);
  Stream s2 = get_stream_from_pool(sim0);
  if (s2 == s1) s2 = get_stream_from_pool(sim0);
  seen_streams.clear();
  Tensor x = ones({64}, TensorOptions(kFloat64).device(sim0)).requires_grad_();
  Tensor mid, out;
  {
    StreamGuard g(s1);
    s1.wait_stream(default_stream(sim0));  // x was filled on the default stream
    mid = RecordStream::apply(x * 2);      // forward on s1
  }
  {
    StreamGuard g(s2);
    s2.wait_stream(s1);
    out = RecordStream::apply(mid.exp());  // forward on s2
  }
  default_stream(sim0).wait_stream(s2);  // out was made on s2
  out.sum().backward();                  // from the default stream
  ASSERT_EQ(seen_streams.size(), 2u);
  EXPECT_EQ(seen_streams[0], s2);  // the later node runs first
  EXPECT_EQ(seen_streams[1], s1);
  // d/dx exp(2x) = 2 exp(2x); the gradient crossed s2 -> s1 -> the leaf's stream.
  EXPECT_ALL_CLOSE(x.grad(), full({64}, 2 * std::exp(2.0), kFloat64), 1e-12);
}

// Crosses from sim:0 to sim:1; its backward brings the gradient back to sim:0 on a side stream
// that a host function holds for 20 ms first, and declares that stream (set_gradient_stream).
Stream side_stream_of_sim0() {
  static const Stream side = [] {
    const Device sim0("sim:0");
    Stream s = get_stream_from_pool(sim0);
    while (s == default_stream(sim0)) s = get_stream_from_pool(sim0);
    return s;
  }();
  return side;
}

struct CrossOnASideStream : autograd::Function<CrossOnASideStream> {
  static Tensor forward(autograd::AutogradContext*, const Tensor& x) {
    return x.to(Device("sim:1"));
  }
  static autograd::variable_list backward(autograd::AutogradContext*,
                                          autograd::variable_list grads) {
    const Stream side = side_stream_of_sim0();
    StreamGuard on_side(side);
    enqueue_host_function(side, [] { std::this_thread::sleep_for(std::chrono::milliseconds(20)); });
    Tensor g = grads[0].to(Device("sim:0")) * 1;  // written on `side`, after the host function
    autograd::set_gradient_stream(side);
    return {g};
  }
};

TEST_P(SimAutograd, AGradientDeclaredOnASideStreamIsWaitedForByItsConsumer) {
  const Tensor a = arange(64, kFloat64);
  Tensor x = a.to(Device("sim:0")).requires_grad_();
  Tensor y = CrossOnASideStream::apply(x * 2);  // MulBackward reads the gradient on sim:0
  const Tensor w = (a + 1).to(Device("sim:1"));
  (y * w).sum().backward();
  // Without the declaration the engine would wait for sim:0's default stream only, and the
  // multiply would read the gradient before the side stream wrote it.
  EXPECT_ALL_CLOSE(x.grad(), (a + 1) * 2);
}

TEST(SetGradientStream, OutsideABackwardFunctionRaises) {
  EXPECT_THAT(error_of<Error>([] { autograd::set_gradient_stream(Stream()); }),
              HasSubstr("expected a call from inside a backward function"));
}

struct Throwing : autograd::Function<Throwing> {
  static Tensor forward(autograd::AutogradContext*, const Tensor& x) { return x * 1; }
  static autograd::variable_list backward(autograd::AutogradContext*, autograd::variable_list) {
    FERRY_FAIL_AS(ShapeError, "deliberate failure in a backward");
  }
};

TEST_P(SimAutograd, AnErrorInADeviceNodeReachesTheCaller) {
  Tensor x = ones({3}, TensorOptions(kFloat32).device(Device("sim:0"))).requires_grad_();
  Tensor y = Throwing::apply(x).sum();
  EXPECT_THAT(error_of<ShapeError>([&] { y.backward(); }),
              HasSubstr("deliberate failure in a backward"));
  // The engine is still usable.
  Tensor z = (x * 2).sum();
  z.backward();
  EXPECT_ALL_CLOSE(x.grad(), full({3}, 2.0));
}

// A checkpoint-like function: forward keeps only its input; backward recomputes with grad mode
// on and runs a nested backward from inside the engine.
struct Recompute : autograd::Function<Recompute> {
  static Tensor forward(autograd::AutogradContext* ctx, const Tensor& x) {
    ctx->save_for_backward({x});
    return x.exp() * x;
  }
  static autograd::variable_list backward(autograd::AutogradContext* ctx,
                                          autograd::variable_list grads) {
    Tensor x = ctx->get_saved_variables()[0].detach().requires_grad_();
    Tensor y;
    {
      AutoGradMode enable(true);
      y = x.exp() * x;
    }
    autograd::backward({y}, {grads[0]});
    return {x.grad()};
  }
};

TEST_P(SimAutograd, NestedBackwardsRunInsideANode) {
  for (const Device d : {Device("cpu"), Device("sim:0")}) {
    Tensor x = full({4}, 0.5, TensorOptions(kFloat64).device(d)).requires_grad_();
    (Recompute::apply(x) * 2).sum().backward();
    // d/dx 2 x e^x = 2 (1 + x) e^x
    EXPECT_ALL_CLOSE(x.grad(), full({4}, 2 * 1.5 * std::exp(0.5), kFloat64), 1e-12);
  }
}

struct SaveOutput : autograd::Function<SaveOutput> {
  static autograd::variable_list forward(autograd::AutogradContext* ctx, const Tensor& x,
                                         double k) {
    Tensor y = x * k;
    Tensor idx = x.argmax();
    ctx->save_for_backward({y});
    ctx->saved_data["k"] = k;
    ctx->mark_non_differentiable({idx});
    return {y, idx};
  }
  static autograd::variable_list backward(autograd::AutogradContext* ctx,
                                          autograd::variable_list grads) {
    const Tensor y = ctx->get_saved_variables()[0];
    EXPECT_TRUE(ctx->needs_input_grad(0));
    EXPECT_FALSE(ctx->needs_input_grad(1));
    return {grads[0] * ctx->saved_data["k"].to_double() + y * 0, Tensor()};
  }
};

TEST(CustomFunction, SavesOutputsDataAndMarksNonDifferentiableOutputs) {
  Tensor x = arange(4, kFloat64).requires_grad_();
  autograd::variable_list out = SaveOutput::apply(x, 3.0);
  EXPECT_TRUE(out[0].requires_grad());
  EXPECT_FALSE(out[1].requires_grad());
  EXPECT_EQ(out[0].grad_fn()->name(), "SaveOutputBackward");
  out[0].sum().backward();
  EXPECT_ALL_CLOSE(x.grad(), full({4}, 3.0, kFloat64));
}

TEST(Gradcheck, AcceptsCorrectFormulasAndFindsWrongOnes) {
  Generator gen(testing::test_seed());
  SCOPED_TRACE(testing::seed_trace());
  Tensor x = rand({3, 2}, kFloat64, &gen).add(0.5).requires_grad_();
  Tensor y = rand({2}, kFloat64, &gen).add(0.5).requires_grad_();
  auto good = autograd::gradcheck(
      [](const autograd::variable_list& in) {
        return autograd::variable_list{(in[0] / in[1]).log() * in[0].rsqrt()};
      },
      {x, y});
  EXPECT_TRUE(good.ok) << good.message;
  auto bad = autograd::gradcheck(
      [](const autograd::variable_list& in) {
        return autograd::variable_list{RecordStream::apply(in[0]) * in[0]};  // fine
      },
      {x});
  EXPECT_TRUE(bad.ok) << bad.message;
  struct Wrong : autograd::Function<Wrong> {
    static Tensor forward(autograd::AutogradContext*, const Tensor& t) { return t * t; }
    static autograd::variable_list backward(autograd::AutogradContext*, autograd::variable_list g) {
      return {g[0]};  // missing the factor 2t
    }
  };
  auto wrong = autograd::gradcheck(
      [](const autograd::variable_list& in) {
        return autograd::variable_list{Wrong::apply(in[0])};
      },
      {x});
  EXPECT_FALSE(wrong.ok);
  EXPECT_THAT(wrong.message, HasSubstr("Jacobian mismatch"));
}

}  // namespace
}  // namespace ferry
