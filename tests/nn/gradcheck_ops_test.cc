// gradcheck (finite differences in float64) over every differentiable operator of the
// elementwise, reduction, view and copy families, and the in-place forms, each on contiguous,
// non-contiguous (permuted) and channels-last inputs and binary ones also broadcast; then the
// same table on sim:0 with chaos delaying its queued work (the values must not change). The nn
// operators (conv, pools, norms, losses, linear algebra, cat/stack/split) have their own
// gradchecks in the suites beside this one.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/device/sim_fixture.h"
#include "tests/nn/nn_ops_test_util.h"

namespace ferry::testing {
namespace {

using autograd::variable_list;

// One operator: a function of its inputs, and how many inputs it takes (1 or 2). `positive`
// inputs are drawn in [0.5, 2) (log, sqrt, div's denominator, pow), others in [-1, 1).
struct OpCase {
  const char* name;
  int arity;
  bool positive;
  Fn fn;
};

Tensor one(const Tensor& t) { return t; }

std::vector<OpCase> op_cases() {
  auto u = [](Tensor (*f)(const Tensor&)) {
    return [f](const variable_list& in) { return variable_list{f(in[0])}; };
  };
  std::vector<OpCase> c = {
      {"exp", 1, false, u([](const Tensor& x) { return x.exp(); })},
      {"log", 1, true, u([](const Tensor& x) { return x.log(); })},
      {"sqrt", 1, true, u([](const Tensor& x) { return x.sqrt(); })},
      {"rsqrt", 1, true, u([](const Tensor& x) { return x.rsqrt(); })},
      {"tanh", 1, false, u([](const Tensor& x) { return x.tanh(); })},
      {"sigmoid", 1, false, u([](const Tensor& x) { return x.sigmoid(); })},
      {"relu", 1, false, u([](const Tensor& x) { return x.relu(); })},
      {"gelu", 1, false, u([](const Tensor& x) { return x.gelu(); })},
      {"gelu_tanh", 1, false, u([](const Tensor& x) { return x.gelu("tanh"); })},
      {"neg", 1, false, u([](const Tensor& x) { return -x; })},
      {"pow", 1, true, u([](const Tensor& x) { return x.pow(2.5); })},
      {"scalar_ops", 1, false, u([](const Tensor& x) { return (x + 2) * 3 - x / 4; })},
      {"sum", 1, false, u([](const Tensor& x) {
         return x.sum({0, x.dim() - 1}, /*keepdim=*/true) + x.sum();
       })},
      {"mean", 1, false, u([](const Tensor& x) { return x.mean({1}) * x.mean(); })},
      {"amax", 1, false, u([](const Tensor& x) { return x.amax({x.dim() - 1}); })},
      {"softmax", 1, false, u([](const Tensor& x) { return x.softmax(1); })},
      {"log_softmax", 1, false, u([](const Tensor& x) { return x.log_softmax(-1); })},
      {"views", 1, false,
       [](const variable_list& in) {
         const Tensor& x = in[0];
         const Tensor p = x.transpose(0, -1).unsqueeze(1).squeeze(1);
         return variable_list{p.slice(0, 1, 4, 2).select(1, 1).transpose(0, 1).reshape({-1}),
                              x.flatten().narrow(0, 3, 8).view({2, 4})};
       }},
      {"expand", 1, false, u([](const Tensor& x) {
         DimVector sizes(x.sizes());
         sizes[0] = 3;
         return x.select(0, 0).unsqueeze(0).expand(sizes) * 2;
       })},
      {"as_strided", 1, false, u([](const Tensor& x) {
         const Tensor d = x.contiguous();
         return d.as_strided({2, 3}, {7, 2}, d.storage_offset() + 1);
       })},
      {"copies", 1, false, u([](const Tensor& x) {
         Tensor y = empty(x.sizes(), x.options());
         y.copy_(x.transpose(0, 1).contiguous().transpose(0, 1));
         return y * x.clone();
       })},
      {"dropout", 1, false,
       [](const variable_list& in) {
         Generator gen(11);  // the same mask at every evaluation
         return variable_list{dropout(in[0], 0.4, true, &gen)};
       }},
      {"inplace", 1, false,
       [](const variable_list& in) {
         Tensor y = in[0] * 1.0;
         y.mul_(in[0]).add_(in[0], 0.5).div_(2).sub_(0.1);
         y.relu_();  // last: its backward needs its output as it wrote it
         return variable_list{y};
       }},
      {"inplace_unary", 1, true,
       [](const variable_list& in) {
         const Tensor& x = in[0];
         Tensor a = x * 1.0, b = x * 1.0, c = x * 1.0, d = x * 1.0, e = x * 1.0;
         a.exp_();
         b.sqrt_();
         c.log_().pow_(3);  // neither saves its output: the chain is fine
         d.tanh_();
         e.sigmoid_();
         return variable_list{a, b, c, d, e, (x * 1.0).rsqrt_()};
       }},
      {"add", 2, false,
       [](const variable_list& in) { return variable_list{add(in[0], in[1], 0.5)}; }},
      {"sub", 2, false,
       [](const variable_list& in) { return variable_list{sub(in[0], in[1], 2)}; }},
      {"mul", 2, false, [](const variable_list& in) { return variable_list{in[0] * in[1]}; }},
      {"div", 2, true, [](const variable_list& in) { return variable_list{in[0] / in[1]}; }},
      {"where", 2, false,
       [](const variable_list& in) {
         return variable_list{where(in[0].gt(in[1]), in[0] * 2, in[1])};
       }},
  };
  return c;
}

// The layouts an operator's inputs come in: the shape each input is built in and how it is
// presented (3 or 4 dims; the views case needs a last dim of 4 and 11 elements or more).
struct Layout {
  const char* name;
  std::vector<std::vector<int64_t>> shapes;  // per input (the second only for binary ops)
  Tensor (*present)(const Tensor&);
};

std::vector<Layout> layouts() {
  return {
      {"contiguous", {{3, 2, 4}, {3, 2, 4}}, &one},
      // Built as [4, 3, 2], presented as [3, 2, 4]: not contiguous.
      {"permuted",
       {{4, 3, 2}, {4, 3, 2}},
       [](const Tensor& t) {
         return t.permute({1, 2, 0});
       }},
      {"channels_last",
       {{3, 2, 2, 4}, {3, 2, 2, 4}},
       [](const Tensor& t) { return t.contiguous(MemoryFormat::ChannelsLast); }},
      {"broadcast", {{3, 2, 4}, {2, 1}}, &one},
  };
}

// Runs every case in every layout on `device`; inputs are float64 leaves on the device.
void check_all(const Device& device) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  for (const OpCase& op : op_cases()) {
    for (const Layout& layout : layouts()) {
      if (op.arity == 1 && std::string(layout.name) == "broadcast") continue;
      SCOPED_TRACE(std::string(op.name) + ", " + layout.name);
      variable_list inputs;
      for (int i = 0; i < op.arity; ++i) {
        const double lo = op.positive ? 0.5 : -1.0, hi = op.positive ? 2.0 : 1.0;
        const Tensor t = layout.present(uniform(rng, layout.shapes[i], kFloat64, lo, hi));
        inputs.push_back(t.to(device).requires_grad_());
      }
      EXPECT_TRUE(grad_ok(op.fn, inputs));
    }
  }
}

TEST(GradcheckOps, EveryElementwiseReductionViewAndCopyOperatorOnTheCpu) {
  check_all(Device("cpu"));
}

class GradcheckOpsOnSim : public SimTest {
 protected:
  sim::SimConfig config() const override {
    sim::SimConfig c;
    c.chaos_seed = test_seed();
    c.chaos_max_delay = std::chrono::microseconds(10);
    return c;
  }
};

TEST_F(GradcheckOpsOnSim, TheSameOperatorsUnderChaos) { check_all(Device("sim:0")); }

}  // namespace
}  // namespace ferry::testing
