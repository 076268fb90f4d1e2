// Module state against PyTorch 1.13 (Debian's /usr/bin/python3 with python3-torch): a torch
// module of the same structure as the test Net (Linear, BatchNorm1d with a non-persistent buffer,
// a bias-less Linear) writes its state_dict and an input/output pair as safetensors files (json +
// struct, no safetensors package); ferry must list the same keys in the same order, load the file
// into its Net and compute the same output, and raise PyTorch's strict load_state_dict message
// for the same broken dict. Skipped with a message when python3 or torch is missing (a failure
// instead when FERRY_REQUIRE_TORCH=1, as in CI).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <regex>
#include <sstream>

#include "ferry/nn/safetensors.h"
#include "tests/memory/memory_fixture.h"
#include "tests/nn/module_test_modules.h"
#include "tests/nn/safetensors_test_util.h"
#include "tests/support/errors.h"
#include "tests/support/random.h"
#include "tests/support/tensor_compare.h"

namespace ferry::testing {
namespace {

using ::testing::HasSubstr;

constexpr const char* kModuleTorchPython = "/usr/bin/python3";

constexpr const char* kScript = R"PY(
import json, struct, sys
try:
    import torch
except ImportError:
    sys.exit(3)
out, seed = sys.argv[1], int(sys.argv[2])
torch.manual_seed(seed)

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(4, 8)
        self.norm = torch.nn.BatchNorm1d(8)
        self.norm.register_buffer("scratch", torch.full((8,), 5.0), persistent=False)
        self.fc2 = torch.nn.Linear(8, 3, bias=False)
    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))

net = Net()
with torch.no_grad():
    net.norm.running_mean.uniform_(-1, 1)
    net.norm.num_batches_tracked.fill_(seed % 1000)
x = torch.randn(5, 4)
y = net(x).detach()

CODES = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64"}
def save(path, tensors):
    header, data = {}, b""
    for name, t in tensors.items():
        blob = t.contiguous().numpy().tobytes()
        header[name] = {"dtype": CODES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    text = json.dumps(header).encode("utf-8")
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)

sd = net.state_dict()
save(out + ".net.safetensors", sd)
save(out + ".io.safetensors", {"x": x, "y": y})
with open(out + ".keys", "w") as f:
    f.write("\n".join(sd.keys()))
bad = dict(sd)
del bad["fc2.weight"]
bad["extra"] = torch.zeros(1)
bad["fc1.weight"] = torch.zeros(8, 5)
try:
    net.load_state_dict(bad)
except RuntimeError as e:
    with open(out + ".error", "w") as f:
        f.write(str(e))
net.to(torch.float64)
with open(out + ".dtypes", "w") as f:
    f.write("\n".join(f"{k} {str(v.dtype)}" for k, v in net.state_dict().items()))
)PY";

// The script runs once per process (about 2 s: importing torch); its outcome is kept.
struct ScriptRun {
  std::string prefix;
  std::string skip;   // why the tests skip, if they do
  std::string error;  // why they fail, if they do
  uint64_t seed = 0;  // the script's torch.manual_seed (the first test's seed)
};

const ScriptRun& script_run() {
  static const ScriptRun run = [] {
    ScriptRun r;
    const bool required = std::getenv("FERRY_REQUIRE_TORCH") != nullptr &&
                          std::string(std::getenv("FERRY_REQUIRE_TORCH")) == "1";
    if (::access(kModuleTorchPython, X_OK) != 0) {
      (required ? r.error : r.skip) = std::string(kModuleTorchPython) +
                                      " is missing: the PyTorch comparison needs Debian's python3 "
                                      "and python3-torch";
      return r;
    }
    r.prefix = scratch_dir() + "/module_torch";
    r.seed = test_seed() % 100000;
    write_file(r.prefix + ".py", kScript);
    const std::string command = std::string(kModuleTorchPython) + " " + r.prefix + ".py " +
                                r.prefix + " " + std::to_string(r.seed);
    const int status = std::system(command.c_str());
    if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 3) {
      (required ? r.error : r.skip) = std::string("torch is not importable by ") +
                                      kModuleTorchPython +
                                      ": install python3-torch (scripts/install-deps.sh --torch)";
    } else if (status != 0) {
      r.error = "the PyTorch script failed (see its output above): " + command;
    }
    return r;
  }();
  return run;
}

class ModuleTorchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const ScriptRun& run = script_run();
    ASSERT_TRUE(run.error.empty()) << run.error;
    if (!run.skip.empty()) GTEST_SKIP() << run.skip;
    prefix_ = run.prefix;
    seed_ = run.seed;
  }

  std::vector<std::string> lines(const std::string& suffix) const {
    std::vector<std::string> out;
    std::istringstream in(read_file(prefix_ + suffix));
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  }

  std::string prefix_;
  uint64_t seed_ = 0;
};

TEST_F(ModuleTorchTest, StateDictKeysMatchPyTorch) {
  Net net;
  EXPECT_EQ(net->state_dict().keys(), lines(".keys"));
}

TEST_F(ModuleTorchTest, LoadsPyTorchsWeightsAndComputesItsOutput) {
  SCOPED_TRACE("torch.manual_seed(" + std::to_string(seed_) + ")");
  const safetensors::LoadedTensors io = safetensors::load(prefix_ + ".io.safetensors");
  for (const std::optional<Device>& device : {std::optional<Device>(), std::optional(kSim0)}) {
    SCOPED_TRACE(device ? device->str() : "cpu");
    Net net;
    const nn::LoadStateDictResult r = net->load(prefix_ + ".net.safetensors", device);
    EXPECT_TRUE(r.missing_keys.empty());
    EXPECT_TRUE(r.unexpected_keys.empty());
    EXPECT_EQ(net->norm->num_batches_tracked.item<int64_t>(), static_cast<int64_t>(seed_ % 1000));
    EXPECT_EQ(net->norm->scratch.device(), device.value_or(Device(DeviceType::CPU)))
        << "the non-persistent buffer moves with the module";
    const Tensor x = io["x"].to(device.value_or(Device(DeviceType::CPU)));
    EXPECT_ALL_CLOSE(net(x).cpu(), io["y"], 1e-5, 1e-6);
  }
}

TEST_F(ModuleTorchTest, StrictErrorIsPyTorchs) {
  Net net;
  TensorDict bad = net->state_dict();
  bad.erase("fc2.weight");
  bad.insert("extra", zeros({1}));
  bad.insert_or_assign("fc1.weight", zeros({8, 5}));
  const Tensor before = net->fc1->bias.clone();
  // PyTorch prints shapes as torch.Size([8, 5]); ferry as [8, 5].
  const std::string torch_message = std::regex_replace(
      read_file(prefix_ + ".error"), std::regex(R"(torch\.Size\((\[[^\]]*\])\))"), "$1");
  ASSERT_FALSE(torch_message.empty());
  EXPECT_THAT(error_of([&] { net->load_state_dict(bad); }), HasSubstr(torch_message));
  EXPECT_ALL_CLOSE(net->fc1->bias, before, 0, 0) << "a failed load copies nothing";
}

TEST_F(ModuleTorchTest, ToFloat64CastsWhatPyTorchCasts) {
  Net net;
  net->to(kFloat64);
  std::vector<std::string> ours;
  for (const auto& item : net->state_dict()) {
    const ScalarType t = item.value().dtype();
    ours.push_back(item.key() + " " +
                   (t == kFloat64 ? "torch.float64"
                    : t == kInt64 ? "torch.int64"
                                  : "other"));
  }
  EXPECT_EQ(ours, lines(".dtypes"));
}

}  // namespace
}  // namespace ferry::testing
