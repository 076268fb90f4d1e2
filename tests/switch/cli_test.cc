// `ferry serve` and `ferry client` as processes (FERRY_TOOL, set by ctest): a served mlp answers
// the client's file with the outputs of the model run directly, a load test prints percentiles,
// errors exit 1 with the server's code, and SIGTERM drains and exits 0. Every wait is bounded;
// the server is killed if it does not stop in time.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "ferry/ferry.h"
#include "ferry/nn/models.h"
#include "ferry/nn/safetensors.h"
#include "ferry/switch/model_config.h"
#include "ferry/switch/served_model.h"
#include "tests/support/tool.h"
#include "tests/switch/switch_test_util.h"

extern char** environ;

namespace ferry::switch_ {
namespace {

using testing::eventually;
using ::testing::HasSubstr;
using testing::TempDir;
using namespace std::chrono_literals;

// A `ferry serve` child process; SIGKILLed when the test forgets or fails to stop it.
class ServeProcess {
 public:
  ServeProcess(const std::vector<std::string>& args, const std::string& log) {
    std::vector<std::string> argv = {::ferry::testing::ferry_tool(), "serve"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> raw;
    for (auto& a : argv) raw.push_back(a.data());
    raw.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    if (posix_spawn(&pid_, raw[0], &actions, nullptr, raw.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
  }
  ~ServeProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  bool started() const { return pid_ > 0; }
  // Sends `sig` and waits up to `timeout`; the exit status, or -1 (then it is killed).
  int stop(int sig, std::chrono::milliseconds timeout) {
    ::kill(pid_, sig);
    int status = 0;
    const bool exited =
        eventually([&] { return ::waitpid(pid_, &status, WNOHANG) == pid_; }, timeout);
    if (!exited) return -1;
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  pid_t pid_ = -1;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(SwitchCli, ServeAndClient) {
  FERRY_SKIP_WITHOUT_TOOL();
  TempDir dir;
  {
    std::ofstream toml(dir.file("models.toml"));
    toml << "[models.tiny]\narch = \"mlp\"\nin_features = 8\nhidden = [16]\nout_features = 3\n"
            "seed = 11\n";
  }
  Tensor x = randn({4, 8});
  TensorDict inputs;
  inputs.insert("features", x);
  safetensors::save(dir.file("x.safetensors"), inputs);
  const std::string socket = dir.file("run/ferry.sock");
  ServeProcess serve(
      {"--devices", "sim:0", "--models", dir.file("models.toml"), "--socket", socket},
      dir.file("serve.log"));
  ASSERT_TRUE(serve.started());
  ASSERT_TRUE(eventually([&] { return ::access(socket.c_str(), F_OK) == 0; }, 30s))
      << read_file(dir.file("serve.log"));

  const std::string common =
      "client --socket '" + socket + "' --input '" + dir.file("x.safetensors") + "' ";
  auto run = ::ferry::testing::run_ferry_tool(common + "--model tiny --output '" +
                                              dir.file("y.safetensors") + "'");
  EXPECT_EQ(run.status, 0) << run.out;
  EXPECT_THAT(run.out, HasSubstr("timings: queue"));
  EXPECT_THAT(run.out, HasSubstr("output y: float32 [4, 3]"));
  auto y = safetensors::load(dir.file("y.safetensors"));
  nn::models::MLPOptions o;
  o.seed = 11;
  auto mlp = nn::models::mlp(8, {16}, 3, o);
  Tensor expected;
  {
    autograd::NoGradGuard no_grad;
    mlp->to(Device("sim:0"));
    mlp->eval();
    expected = mlp->forward(x.to(Device("sim:0"))).cpu();
  }
  ASSERT_NE(y.find("y"), nullptr);
  EXPECT_TRUE(testing::same_tensor(*y.find("y"), expected));

  auto load = ::ferry::testing::run_ferry_tool(common + "--model tiny --load 60 --clients 4");
  EXPECT_EQ(load.status, 0) << load.out;
  EXPECT_THAT(load.out, HasSubstr("requests: 60 ok, 0 failed"));
  EXPECT_THAT(load.out, HasSubstr("latency: p50"));
  EXPECT_THAT(load.out, HasSubstr("requests/s"));

  auto unknown = ::ferry::testing::run_ferry_tool(common + "--model nope");
  EXPECT_EQ(unknown.status, 1) << unknown.out;
  EXPECT_THAT(unknown.out, HasSubstr("unknown_model"));

  EXPECT_EQ(serve.stop(SIGTERM, 20s), 0);
  const std::string log = read_file(dir.file("serve.log"));
  EXPECT_THAT(log, HasSubstr("listening on"));
  EXPECT_THAT(log, HasSubstr("stopped after answering"));
  EXPECT_NE(::access(socket.c_str(), F_OK), 0) << "the socket file is removed";
}

TEST(SwitchCli, ServeSwitchesUnderAZipfLoad) {
  FERRY_SKIP_WITHOUT_TOOL();
  TempDir dir;
  const std::string toml_text =
      "[models.one]\narch = \"mlp\"\nin_features = 8\nhidden = [16]\nout_features = 3\n"
      "[models.two]\narch = \"mlp\"\nin_features = 8\nhidden = [16]\nout_features = 3\n"
      "seed = 2\n";
  {
    std::ofstream toml(dir.file("models.toml"));
    toml << toml_text;
  }
  // Room for one of the two (worker processes' parameter ranges are whole 512-byte blocks).
  const uint64_t weights = ServedModel(parse_models_toml(toml_text, "/").models[0]).weight_bytes();
  const uint64_t one = (weights + 511) / 512 * 512;
  TensorDict inputs;
  inputs.insert("x", randn({2, 8}));
  safetensors::save(dir.file("x.safetensors"), inputs);
  const std::string socket = dir.file("run/ferry.sock");
  ServeProcess serve({"--devices", "sim:0", "--models", dir.file("models.toml"), "--socket", socket,
                      "--resident-bytes", std::to_string(one), "-v"},
                     dir.file("serve.log"));
  ASSERT_TRUE(serve.started());
  ASSERT_TRUE(eventually([&] { return ::access(socket.c_str(), F_OK) == 0; }, 30s))
      << read_file(dir.file("serve.log"));
  auto load = ::ferry::testing::run_ferry_tool(
      "client --socket '" + socket + "' --input '" + dir.file("x.safetensors") +
      "' --load 20 --clients 2 --models one,two --zipf 0.5 --seed 3");
  EXPECT_EQ(load.status, 0) << load.out;
  EXPECT_THAT(load.out, HasSubstr("seed 3"));
  EXPECT_THAT(load.out, HasSubstr("requests: 20 ok, 0 failed"));
  EXPECT_THAT(load.out, HasSubstr("per model: one "));
  EXPECT_EQ(serve.stop(SIGTERM, 20s), 0);
  const std::string log = read_file(dir.file("serve.log"));
  EXPECT_THAT(log, HasSubstr("resident capacity " + std::to_string(one) + " bytes"));
  EXPECT_THAT(log, HasSubstr("switch two -> sim:0"));
  EXPECT_THAT(log, HasSubstr("evicted [one]"));
}

#if FERRY_WITH_TRANSPORT
// Two controllers: the first offers its model's weights (loaded from its file), the second,
// whose configuration names a weights file it does not have, fetches them from the first,
// answers as the model does, and announces itself as a holder.
TEST(SwitchCli, ServeFetchesWeightsFromAnotherController) {
  FERRY_SKIP_WITHOUT_TOOL();
  TempDir dir;
  ::setenv("FERRY_TRANSPORT_SECRET", "cli-test-secret", /*overwrite=*/0);
  nn::models::MLPOptions o;
  o.seed = 21;
  auto mlp = nn::models::mlp(8, {16}, 3, o);
  std::filesystem::create_directories(dir.file("a"));
  std::filesystem::create_directories(dir.file("b"));
  safetensors::save(dir.file("a/w.safetensors"), mlp->state_dict());
  const std::string toml_text =
      "[models.tiny]\narch = \"mlp\"\nin_features = 8\nhidden = [16]\nout_features = 3\n"
      "weights = \"w.safetensors\"\n";
  for (const char* side : {"a", "b"}) {
    std::ofstream toml(dir.file(std::string(side) + "/models.toml"));
    toml << toml_text;
  }
  ServeProcess holder({"--in-process", "--devices", "sim:0", "--models", dir.file("a/models.toml"),
                       "--socket", dir.file("a/run/s.sock"), "--share-weights", "127.0.0.1:0"},
                      dir.file("a.log"));
  ASSERT_TRUE(holder.started());
  std::string port;
  ASSERT_TRUE(eventually(
      [&] {
        const std::string log = read_file(dir.file("a.log"));
        const size_t at = log.find("shared on 127.0.0.1:");
        if (at == std::string::npos) return false;
        port = log.substr(at + 20, log.find('\n', at) - at - 20);
        return true;
      },
      60s))
      << read_file(dir.file("a.log"));

  const std::string socket = dir.file("b/run/s.sock");
  ServeProcess fetcher(
      {"--devices", "sim:0", "--models", dir.file("b/models.toml"), "--socket", socket,
       "--weights-from", "127.0.0.1:" + port, "--share-weights", "127.0.0.1:0"},
      dir.file("b.log"));
  ASSERT_TRUE(fetcher.started());
  ASSERT_TRUE(eventually([&] { return ::access(socket.c_str(), F_OK) == 0; }, 60s))
      << read_file(dir.file("b.log"));
  Tensor x = randn({4, 8});
  TensorDict inputs;
  inputs.insert("x", x);
  safetensors::save(dir.file("x.safetensors"), inputs);
  auto run = ::ferry::testing::run_ferry_tool(
      "client --socket '" + socket + "' --input '" + dir.file("x.safetensors") +
      "' --model tiny --output '" + dir.file("y.safetensors") + "'");
  EXPECT_EQ(run.status, 0) << run.out;
  Tensor expected;
  {
    autograd::NoGradGuard no_grad;
    mlp->eval();
    expected = mlp->forward(x);
  }
  auto y = safetensors::load(dir.file("y.safetensors"));
  ASSERT_NE(y.find("y"), nullptr);
  EXPECT_TRUE(testing::same_tensor(*y.find("y"), expected));
  EXPECT_EQ(fetcher.stop(SIGTERM, 20s), 0);
  EXPECT_EQ(holder.stop(SIGTERM, 20s), 0);
  EXPECT_THAT(read_file(dir.file("b.log")),
              HasSubstr("model 'tiny': weights fetched from 127.0.0.1:" + port));
  EXPECT_THAT(read_file(dir.file("a.log")), HasSubstr("holds 'tiny' too"));
}
#endif  // FERRY_WITH_TRANSPORT

TEST(SwitchCli, ServeRefusesABadConfig) {
  FERRY_SKIP_WITHOUT_TOOL();
  TempDir dir;
  {
    std::ofstream toml(dir.file("models.toml"));
    toml << "[models.a]\narch = \"alexnet\"\n";
  }
  auto run = ::ferry::testing::run_ferry_tool("serve --models '" + dir.file("models.toml") +
                                              "' --socket '" + dir.file("s/ferry.sock") + "'");
  EXPECT_NE(run.status, 0);
  EXPECT_THAT(run.out, HasSubstr("expected `arch` to be one of"));
}

}  // namespace
}  // namespace ferry::switch_
