// The in-process model server: models.toml parsing and its errors, and served models (mlp,
// resnet18, a small BERT) whose answers over the socket equal running the same zoo model
// directly on the same device; wrong inputs answer bad_input naming expected and given, unknown
// models list the known ones.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "ferry/ferry.h"
#include "ferry/nn/models.h"
#include "ferry/nn/safetensors.h"
#include "ferry/switch/client.h"
#include "ferry/switch/model_config.h"
#include "ferry/switch/server.h"
#include "ferry/switch/switching_handler.h"
#include "tests/support/errors.h"
#include "tests/switch/switch_test_util.h"

namespace ferry::switch_ {
namespace {

using ::ferry::testing::error_of;
using ::testing::HasSubstr;
using testing::same_tensor;
using testing::TempDir;

const std::string kTiny = R"(
[models.tiny]
arch = "mlp"
in_features = 16
hidden = [32, 8]
out_features = 4
seed = 3
)";
const std::string kVision = R"(
[models.vision]
arch = "resnet18"
num_classes = 10
seed = 5
)";
const std::string kText = R"(
[models.text]
arch = "bert"
vocab_size = 50
hidden_size = 16
num_hidden_layers = 1
num_attention_heads = 2
intermediate_size = 32
max_position_embeddings = 16
seed = 9
)";
// The three together; a test that asks one model serves that one alone (a served ResNet-18 is
// built and profiled first: most of such a test's time under ThreadSanitizer).
const std::string kModels = kTiny + kVision + kText;

TEST(SwitchConfig, WrittenBackAsTomlItReadsTheSameModels) {
  const ServeConfig c = parse_models_toml(kModels, "/base");
  for (bool with_weights : {false, true}) {
    const ServeConfig back = parse_models_toml(to_models_toml(c, with_weights), "/base");
    ASSERT_EQ(back.models.size(), c.models.size());
    for (size_t i = 0; i < c.models.size(); ++i) {
      const ModelConfig& a = c.models[i];
      const ModelConfig& b = back.models[i];
      EXPECT_EQ(b.name, a.name);
      EXPECT_EQ(b.arch, a.arch);
      EXPECT_EQ(b.seed, a.seed);
      EXPECT_EQ(b.in_features, a.in_features);
      EXPECT_EQ(b.hidden, a.hidden);
      EXPECT_EQ(b.out_features, a.out_features);
      EXPECT_EQ(b.activation, a.activation);
      EXPECT_EQ(b.num_classes, a.num_classes);
      EXPECT_EQ(b.bert.hidden_size, a.bert.hidden_size);
      EXPECT_EQ(b.bert.num_hidden_layers, a.bert.num_hidden_layers);
      EXPECT_EQ(b.bert.vocab_size, a.bert.vocab_size);
      EXPECT_EQ(b.bert.max_position_embeddings, a.bert.max_position_embeddings);
      EXPECT_EQ(b.weights, a.weights);  // kModels names no weights files
    }
  }
  ModelConfig with_file = c.models[1];
  with_file.weights = "/base/tiny.safetensors";
  const std::string text = to_models_toml(ServeConfig{{with_file}}, /*with_weights=*/true);
  EXPECT_THAT(text, HasSubstr("/base/tiny.safetensors"));
  EXPECT_THAT(to_models_toml(ServeConfig{{with_file}}, /*with_weights=*/false),
              ::testing::Not(HasSubstr("tiny.safetensors")));
}

TEST(SwitchConfig, ParsesModels) {
  const ServeConfig c = parse_models_toml(kModels, "/base");
  ASSERT_EQ(c.models.size(), 3u);
  const ModelConfig& tiny = c.models[1];
  EXPECT_EQ(tiny.name, "tiny");
  EXPECT_EQ(tiny.in_features, 16);
  EXPECT_EQ(tiny.hidden, (std::vector<int64_t>{32, 8}));
  EXPECT_EQ(tiny.seed, 3u);
  EXPECT_EQ(c.models[0].bert.hidden_size, 16);
  EXPECT_EQ(c.models[2].num_classes, 10);
  const ServeConfig w =
      parse_models_toml("[models.a]\narch = \"resnet50\"\nweights = \"w/a.st\"\n", "/base/dir");
  EXPECT_EQ(w.models[0].weights, "/base/dir/w/a.st");
}

TEST(SwitchConfig, ErrorsNameWhatWasExpected) {
  const auto err = [](const std::string& text) {
    return error_of<ConfigError>([&] { parse_models_toml(text, "/", "m.toml"); });
  };
  EXPECT_THAT(err("[models.a]\narch = \"vgg\"\n"), HasSubstr("one of mlp, resnet18"));
  EXPECT_THAT(err("[models.a]\nweights = \"x\"\n"), HasSubstr("expected `arch`"));
  EXPECT_THAT(err("[models.a]\narch = \"resnet18\"\nnum_clases = 3\n"),
              HasSubstr("unknown key `num_clases`"));
  EXPECT_THAT(err("[models.a]\narch = \"mlp\"\nin_features = 4\n"),
              HasSubstr("expected `out_features`"));
  EXPECT_THAT(err("[models.a]\narch = \"mlp\"\nin_features = \"4\"\nout_features = 2\n"),
              HasSubstr("expected `in_features` to be a non-negative integer, but it is string"));
  EXPECT_THAT(err("[models.a\narch = 1\n"), HasSubstr("not valid TOML"));
  EXPECT_THAT(err(""), HasSubstr("at least one [models.NAME]"));
  EXPECT_THAT(err("x = 1\n[models.a]\narch = \"resnet18\"\n"), HasSubstr("top-level key `x`"));
  EXPECT_THAT(error_of<ConfigError>([] { parse_models_toml_file("/nonexistent/models.toml"); }),
              HasSubstr("could not open"));
}

class SwitchLocal : public ::testing::Test {
 protected:
  void serve(const std::string& toml) {
    config = parse_models_toml(toml, dir.path());
    SwitchingOptions switching;
    switching.profile_shape = {1, 32, 8};
    switching.profile_repeats = 1;
    handler =
        std::make_shared<SwitchingHandler>(config, std::vector<Device>{Device("sim:0")}, switching);
    ServerOptions options;
    options.socket_path = dir.file("ferry.sock");
    server = std::make_unique<Server>(options, handler);
    client = std::make_unique<Client>(server->socket_path());
  }
  SwitchError error_for(const std::string& model, const std::vector<NamedTensor>& inputs) {
    try {
      client->infer(model, inputs);
    } catch (const SwitchError& e) {
      return e;
    }
    return SwitchError(ErrorCode::internal, "(no error)");
  }

  TempDir dir;
  ServeConfig config;
  std::shared_ptr<SwitchingHandler> handler;
  std::unique_ptr<Server> server;
  std::unique_ptr<Client> client;
};

// Runs `forward` with no grad on sim:0 and returns the CPU result.
template <typename Model, typename Fn>
Tensor direct(Model& model, Fn&& forward) {
  autograd::NoGradGuard no_grad;
  model->to(Device("sim:0"));
  model->eval();
  return forward().cpu().contiguous();
}

TEST_F(SwitchLocal, MlpEqualsTheModelRunDirectly) {
  serve(kTiny);
  Tensor x = randn({5, 16});
  InferResult r = client->infer("tiny", {{"whatever", x}});
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_EQ(r.outputs[0].name, "y");
  nn::models::MLPOptions o;
  o.seed = 3;
  auto mlp = nn::models::mlp(16, {32, 8}, 4, o);
  EXPECT_TRUE(same_tensor(r.outputs[0].tensor,
                          direct(mlp, [&] { return mlp->forward(x.to(Device("sim:0"))); })));
  EXPECT_GT(r.timings.compute_ms, 0);
}

TEST_F(SwitchLocal, WeightsFromAFileAreUsed) {
  nn::models::MLPOptions o;
  o.seed = 77;
  auto mlp = nn::models::mlp(16, {32, 8}, 4, o);
  safetensors::save(dir.file("tiny.safetensors"), mlp->state_dict());
  serve(
      "[models.tiny]\narch = \"mlp\"\nin_features = 16\nhidden = [32, 8]\nout_features = 4\n"
      "weights = \"tiny.safetensors\"\n");
  Tensor x = randn({2, 16});
  InferResult r = client->infer("tiny", {{"x", x}});
  EXPECT_TRUE(same_tensor(r.outputs.at(0).tensor,
                          direct(mlp, [&] { return mlp->forward(x.to(Device("sim:0"))); })));
}

TEST_F(SwitchLocal, ResNet18AtASmallInputEqualsTheModelRunDirectly) {
  serve(kVision);
  Tensor x = randn({1, 3, 32, 32});
  InferResult r = client->infer("vision", {{"x", x}});
  nn::models::ResNetOptions o;
  o.num_classes = 10;
  o.seed = 5;
  auto net = nn::models::resnet18(o);
  EXPECT_TRUE(same_tensor(r.outputs.at(0).tensor,
                          direct(net, [&] { return net->forward(x.to(Device("sim:0"))); })));
}

TEST_F(SwitchLocal, SmallBertEqualsTheModelRunDirectly) {
  serve(kText);
  Tensor ids = randint(0, 50, {2, 8}, TensorOptions(kInt64));
  InferResult r = client->infer("text", {{"input_ids", ids}});
  ASSERT_EQ(r.outputs.size(), 2u);
  nn::models::BertConfig c = config.models[0].bert;
  auto bert = nn::models::bert(c);
  Tensor expected =
      direct(bert, [&] { return bert->forward(ids.to(Device("sim:0"))).last_hidden_state; });
  EXPECT_TRUE(same_tensor(r.outputs[0].tensor, expected));
  EXPECT_EQ(error_for("text", {{"input_ids", full({1, 4}, 50, TensorOptions(kInt64))}}).code(),
            ErrorCode::bad_input);
  EXPECT_THAT(error_for("text", {{"input_ids", full({1, 17}, 1, TensorOptions(kInt64))}}).what(),
              HasSubstr("sequence <= 16"));
  EXPECT_THAT(error_for("text", {{"tokens", ids}}).what(), HasSubstr("unknown input 'tokens'"));
  EXPECT_THAT(error_for("text", {{"attention_mask", ids}}).what(),
              HasSubstr("missing input 'input_ids'"));
}

TEST_F(SwitchLocal, WrongInputsAndUnknownModels) {
  serve(kModels);
  SwitchError shape = error_for("tiny", {{"x", randn({2, 15})}});
  EXPECT_EQ(shape.code(), ErrorCode::bad_input);
  EXPECT_THAT(shape.what(), HasSubstr("expected float32 [*, 16], but got float32 [2, 15]"));
  SwitchError dtype = error_for("tiny", {{"x", zeros({2, 16}, TensorOptions(kFloat64))}});
  EXPECT_THAT(dtype.what(), HasSubstr("but got float64 [2, 16]"));
  SwitchError count = error_for("tiny", {{"a", randn({2, 16})}, {"b", randn({2, 16})}});
  EXPECT_THAT(count.what(), HasSubstr("expected 1 input tensor"));
  SwitchError channels = error_for("vision", {{"x", randn({1, 4, 32, 32})}});
  EXPECT_THAT(channels.what(), HasSubstr("expected float32 [*, 3, *, *]"));
  SwitchError unknown = error_for("gpt", {{"x", randn({1})}});
  EXPECT_EQ(unknown.code(), ErrorCode::unknown_model);
  EXPECT_THAT(unknown.what(), HasSubstr("this server has: text, tiny, vision"));
  // The connection and the server go on.
  EXPECT_EQ(client->infer("tiny", {{"x", randn({1, 16})}}).outputs.size(), 1u);
}

}  // namespace
}  // namespace ferry::switch_
