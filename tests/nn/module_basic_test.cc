// nn::Module without moves: registration rules and errors, the recursive accessors and their
// dotted names, sharing (each tensor and module once), apply, train/eval, zero_grad, printing as
// PyTorch's repr, and the ModuleHolder / FERRY_MODULE wrapper.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "tests/nn/module_test_modules.h"
#include "tests/support/errors.h"

namespace ferry::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string repr(const nn::Module& m) {
  std::ostringstream out;
  out << m;
  return out.str();
}

TEST(ModuleBasic, NamesAreDottedAndInRegistrationOrder) {
  Net net;
  EXPECT_THAT(net->named_parameters().keys(),
              ElementsAre("fc1.weight", "fc1.bias", "norm.weight", "norm.bias", "fc2.weight"));
  EXPECT_THAT(net->named_buffers().keys(), ElementsAre("norm.running_mean", "norm.running_var",
                                                       "norm.num_batches_tracked", "norm.scratch"));
  EXPECT_THAT(net->named_children().keys(), ElementsAre("fc1", "norm", "fc2"));
  EXPECT_THAT(net->named_modules().keys(), ElementsAre("", "fc1", "norm", "fc2"));
  EXPECT_THAT(net->named_modules("net").keys(),
              ElementsAre("net", "net.fc1", "net.norm", "net.fc2"));
  EXPECT_THAT(net->named_modules("", false).keys(), ElementsAre("fc1", "norm", "fc2"));
  EXPECT_EQ(net->modules().size(), 4u);
  EXPECT_EQ(net->modules().front().get(), net.get());
  EXPECT_EQ(net->children().size(), 3u);
  EXPECT_EQ(net->parameters().size(), 5u);
  EXPECT_EQ(net->parameters(/*recurse=*/false).size(), 0u);
  EXPECT_EQ(net->fc1->parameters(false).size(), 2u);
  EXPECT_EQ(net->buffers().size(), 4u);
  EXPECT_TRUE(net->fc1->weight.requires_grad());
  EXPECT_TRUE(net->parameters()[0].is_same(net->fc1->weight));
  // The bias-less layer registered an undefined slot, which the accessors skip.
  EXPECT_EQ(net->fc2->own_parameters().size(), 2u);
  EXPECT_FALSE(net->fc2->own_parameters()["bias"].defined());
  EXPECT_TRUE(net->norm->is_persistent_buffer("running_mean"));
  EXPECT_FALSE(net->norm->is_persistent_buffer("scratch"));
}

TEST(ModuleBasic, RegistrationErrors) {
  nn::Module m("M");
  m.register_parameter("w", ones({2}));
  EXPECT_THAT(error_of([&] { m.register_parameter("a.b", ones({2})); }),
              HasSubstr("Parameter name must not contain a dot (got \"a.b\")"));
  EXPECT_THAT(error_of([&] { m.register_buffer("", ones({2})); }),
              HasSubstr("Buffer name must not be empty"));
  EXPECT_THAT(error_of([&] { m.register_buffer("w", ones({2})); }),
              HasSubstr("Buffer 'w' already defined: M has a parameter of that name"));
  EXPECT_THAT(error_of([&] { m.register_module("w", std::make_shared<nn::Module>()); }),
              HasSubstr("Submodule 'w' already defined"));
  const Tensor leaf = ones({2}, TensorOptions().requires_grad(true));
  EXPECT_THAT(error_of([&] { m.register_parameter("y", leaf * 2); }),
              HasSubstr("'y' is not a leaf"));
  EXPECT_THAT(error_of([&] { m.register_parameter("i", ones({2}, kInt64)); }),
              HasSubstr("can require gradients"));
  m.register_parameter("i", ones({2}, kInt64), /*requires_grad=*/false);
  auto child = std::make_shared<nn::Module>("Child");
  auto self = std::make_shared<nn::Module>("Self");
  self->register_module("child", child);
  EXPECT_THAT(error_of([&] { child->register_module("up", self); }),
              HasSubstr("would make Child its own descendant"));
  EXPECT_THAT(error_of([&] { self->replace_module("nope", child); }),
              HasSubstr("Self has no submodule named 'nope'"));
  EXPECT_THAT(error_of([&] { (void)m.modules(); }),
              HasSubstr("must be owned by a std::shared_ptr"));
  EXPECT_EQ(m.modules(/*include_self=*/false).size(), 0u);
}

TEST(ModuleBasic, SharedTensorsAndModulesAreVisitedOnce) {
  auto root = std::make_shared<nn::Module>("Root");
  auto a = root->register_module("a", LinearLike(2, 2));
  auto b = root->register_module("b", LinearLike(2, 2));
  ASSERT_NE(b, nullptr);
  auto tied = std::make_shared<nn::Module>("Tied");
  tied->register_parameter("weight", a->weight);  // the same tensor under a second name
  root->register_module("tied", tied);
  root->register_module("again", a);  // the same module under a second name
  EXPECT_THAT(root->named_parameters().keys(),
              ElementsAre("a.weight", "a.bias", "b.weight", "b.bias"));
  EXPECT_THAT(root->named_modules().keys(), ElementsAre("", "a", "b", "tied"));
  EXPECT_THAT(root->named_children().keys(), ElementsAre("a", "b", "tied"));
  // state_dict lists every name, as PyTorch's does.
  EXPECT_THAT(root->state_dict().keys(), ElementsAre("a.weight", "a.bias", "b.weight", "b.bias",
                                                     "tied.weight", "again.weight", "again.bias"));
  int visits = 0;
  root->apply([&](nn::Module&) { ++visits; });
  EXPECT_EQ(visits, 4);
  std::vector<std::string> names;
  root->apply([&](const std::string& name, nn::Module&) { names.push_back(name); }, "root");
  EXPECT_THAT(names, ElementsAre("root", "root.a", "root.b", "root.tied"));
}

TEST(ModuleBasic, TrainEvalAndZeroGrad) {
  Net net;
  EXPECT_TRUE(net->is_training());
  net->eval();
  for (const auto& m : net->modules()) EXPECT_FALSE(m->is_training());
  net->train();
  EXPECT_TRUE(net->fc2->is_training());

  net(randn({5, 4})).sum().backward();
  for (const Tensor& p : net->parameters()) {
    if (p.is_same(net->norm->weight) || p.is_same(net->norm->bias)) continue;
    EXPECT_TRUE(p.grad().defined());
  }
  const Tensor grad = net->fc1->weight.grad();
  net->zero_grad(/*set_to_none=*/false);
  EXPECT_TRUE(net->fc1->weight.grad().is_same(grad)) << "zeroed in place";
  EXPECT_EQ(grad.abs().sum().item<double>(), 0.0);
  net->zero_grad();
  EXPECT_FALSE(net->fc1->weight.grad().defined());
}

TEST(ModuleBasic, PrintsLikePyTorch) {
  Net net;
  EXPECT_EQ(repr(*net),
            "Net(\n"
            "  (fc1): LinearLike(in_features=4, out_features=8, bias=True)\n"
            "  (norm): NormLike(8, eps=1e-05, momentum=0.1)\n"
            "  (fc2): LinearLike(in_features=8, out_features=3, bias=False)\n"
            ")");
  auto outer = std::make_shared<nn::Module>("Outer");
  outer->register_module("inner", net.ptr());
  outer->register_module("empty", std::make_shared<nn::Module>("ReLU"));
  std::ostringstream s;
  s << Net(net.ptr()) << "|" << *outer;
  EXPECT_THAT(s.str(), HasSubstr("Outer(\n  (inner): Net(\n    (fc1): LinearLike(in_features=4"));
  EXPECT_THAT(s.str(),
              HasSubstr("    (fc2): LinearLike(in_features=8, out_features=3, bias=False)\n"
                        "  )\n  (empty): ReLU()\n)"));
  struct TwoLines : nn::Module {
    TwoLines() : Module("TwoLines") {}
    std::string extra_repr() const override { return "a=1\nb=2"; }
  };
  EXPECT_EQ(repr(TwoLines()), "TwoLines(\n  a=1\n  b=2\n)");
  EXPECT_EQ(nn::Module().name(), "Module");
  EXPECT_EQ(net->name(), "Net");
}

TEST(ModuleBasic, HolderReadsAsPyTorch) {
  LinearLike empty(nullptr);
  EXPECT_TRUE(empty.is_empty());
  EXPECT_FALSE(static_cast<bool>(empty));
  EXPECT_THAT(error_of([&] { (void)empty->weight; }), HasSubstr("Accessing empty ModuleHolder"));
  LinearLike layer(3, 2);
  LinearLike same = layer;
  EXPECT_EQ(same.get(), layer.get());
  const Tensor y = layer(ones({4, 3}));
  EXPECT_EQ(y.sizes(), IntArrayRef({4, 2}));
  Net net;  // default-constructible: the holder builds the module
  EXPECT_FALSE(net.is_empty());
  empty = layer;
  EXPECT_EQ(empty->in, 3);
  static_assert(!std::is_default_constructible_v<LinearLike>);
}

}  // namespace
}  // namespace ferry::testing
