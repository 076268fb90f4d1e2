// The transport between processes: this test's endpoint and one to three transport_peer
// processes (tests/transport/peer), over loopback TCP and over shared memory (UCX_TLS), with
// random tensors from a printed seed, sim devices with chaos, and a peer killed mid-receive. Every
// child is killed and reaped when its deadline passes; every wait is bounded.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "ferry/ferry.h"
#include "ferry/pipeline/pipeline.h"
#include "ferry/transport/endpoint.h"
#include "ferry/transport/group.h"
#include "tests/support/errors.h"
#include "tests/support/random.h"
#include "tests/support/tensor_compare.h"
#include "tests/transport/peer/gpipe_case.h"
#include "tests/transport/peer/mesh.h"

extern char** environ;

namespace ferry::transport {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

const char* peer_program() { return std::getenv("FERRY_TRANSPORT_PEER"); }

// Sets an environment variable for this scope (the test's endpoint reads UCX_TLS when created,
// and the children inherit it).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// A transport_peer process; killed and reaped on destruction if still running.
class Child {
 public:
  explicit Child(std::vector<std::string> args, const char* program = peer_program()) {
    args.insert(args.begin(), program);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int rc = posix_spawn(&pid_, argv[0], nullptr, nullptr, argv.data(), environ);
    if (rc != 0) pid_ = -1;
  }
  ~Child() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  // The exit status, waiting up to `timeout` (then killed: -1).
  int wait(std::chrono::milliseconds timeout = 30s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    int status = 0;
    while (pid_ > 0) {
      const pid_t r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
        pid_ = -1;
        return -1;
      }
      std::this_thread::sleep_for(5ms);
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
};

// The transports under test: UCX_TLS values. Connections are made and authenticated over TCP in
// both (UCX's sockaddr connection manager); the tensors then move over what UCX_TLS allows
// between the two processes: TCP over loopback, or shared memory.
struct Transport {
  std::string name;
  std::string tls;
  std::string data_lane;     // what ucp_ep_print_info shows for the data endpoint's lanes
  bool single_copy = false;  // UCX_CMA_MEMORY_INVALIDATE=y in both processes (docs/transport.md)
};
void PrintTo(const Transport& t, std::ostream* out) {
  *out << t.name << " (UCX_TLS=" << t.tls << ")";
}

class TransportProcesses : public ::testing::TestWithParam<Transport> {
 protected:
  void SetUp() override {
    if (peer_program() == nullptr) GTEST_SKIP() << "FERRY_TRANSPORT_PEER is not set (run ctest)";
  }
  EndpointOptions options() const {
    EndpointOptions o;
    o.name = "test";
    o.secret = "multiprocess-secret";
    o.timeout = 30s;
    return o;
  }
  ScopedEnv secret_{"FERRY_TRANSPORT_SECRET", "multiprocess-secret"};
  ScopedEnv tls_{"UCX_TLS", GetParam().tls};
  ScopedEnv single_copy_{"UCX_CMA_MEMORY_INVALIDATE", GetParam().single_copy ? "y" : "n"};
};

TEST_P(TransportProcesses, TwoProcessesEchoRandomTensorsBitForBit) {
  SCOPED_TRACE(ferry::testing::seed_trace());
  Endpoint endpoint(options());
  const uint16_t port = endpoint.listen();
  auto rng = ferry::testing::test_rng();
  Generator gen(ferry::testing::test_seed());
  const std::vector<ScalarType> dtypes = {kFloat32, kBFloat16, kFloat64,  kInt64,
                                          kUInt8,   kBool,     kComplex64};
  std::vector<Tensor> sent;
  for (int i = 0; i < 24; ++i) {
    const int64_t rows = 1 + int64_t(rng() % 300), cols = 1 + int64_t(rng() % 3000);
    Tensor t = randn({rows, cols}, kFloat64, &gen).mul(50.0).to(dtypes[i % dtypes.size()]);
    if (i % 3 == 1) t = t.t();                   // dense, transposed
    if (i % 3 == 2) t = t.slice(1, 0, cols, 2);  // strided
    sent.push_back(t);
  }
  Child child({"echo", std::to_string(port), std::to_string(sent.size()), "cpu"});
  ASSERT_GT(child.pid(), 0);
  const PeerId peer = endpoint.accept();
  EXPECT_THAT(endpoint.peer_name(peer), HasSubstr("echo-peer (127.0.0.1:"));
  // The data moves over the transport under test (UCX's own account of the connection), and
  // over no network device but loopback (EndpointOptions::network_devices).
  const std::string lanes = endpoint.describe(peer);
  EXPECT_THAT(lanes, HasSubstr(GetParam().data_lane)) << lanes;
  if (!GetParam().single_copy) {
    EXPECT_THAT(lanes, Not(HasSubstr("cma"))) << lanes;
  }
  EXPECT_THAT(lanes, Not(HasSubstr("eth"))) << lanes;
  std::vector<Future<void>> sends;
  for (size_t i = 0; i < sent.size(); ++i) sends.push_back(endpoint.send(sent[i], peer, i));
  for (size_t i = 0; i < sent.size(); ++i) {
    SCOPED_TRACE("tensor " + std::to_string(i));
    const Tensor back = endpoint.recv(peer, i).get();
    EXPECT_EQ(back.scalar_type(), sent[i].scalar_type());
    EXPECT_ALL_CLOSE(back.to(kComplex128), sent[i].to(kComplex128), 0.0, 0.0);
  }
  for (auto& s : sends) s.wait();
  EXPECT_EQ(child.wait(), 0);
}

// Device tensors both ways: the child receives onto sim:0 and sends from there (its own sim
// device, chaos on), this process sends from sim:0 and receives onto sim:1.
TEST_P(TransportProcesses, DeviceTensorsCrossProcessesInStreamOrder) {
  SCOPED_TRACE(ferry::testing::seed_trace());
  ScopedEnv chaos("FERRY_SIM_CHAOS",
                  std::to_string(ferry::testing::test_seed() % 100000) + ":300us");
  sim::reset_config();
  Endpoint endpoint(options());
  const uint16_t port = endpoint.listen();
  Child child({"echo", std::to_string(port), "4", "sim:0"});
  const PeerId peer = endpoint.accept();
  Generator gen(ferry::testing::test_seed());
  for (int i = 0; i < 4; ++i) {
    const Tensor host = randn({i % 2 == 0 ? 500 : 400000}, kFloat32, &gen);
    Tensor on_device = host.to(Device("sim:0"));
    on_device.mul_(2.0);  // queued; the send waits for it
    auto sent = endpoint.send(on_device, peer, uint64_t(i));
    const Tensor back = endpoint.recv(peer, uint64_t(i), TensorOptions(Device("sim:1"))).get();
    sent.wait();
    EXPECT_EQ(back.device(), Device("sim:1"));
    EXPECT_ALL_CLOSE(back.to(kCPU), host.mul(2.0), 0.0, 0.0);
  }
  EXPECT_EQ(child.wait(), 0);
  sim::reset_config();
}

// Four processes: this one (rank 0) and three peers join a group with Group::rendezvous, then
// every rank exchanges a tensor with every other and the peers report what they checked.
TEST_P(TransportProcesses, FourProcessesExchangeWithEachOther) {
  constexpr int kWorld = 4;
  auto endpoint = std::make_shared<Endpoint>(options());
  const uint16_t port = endpoint->listen();
  std::vector<std::unique_ptr<Child>> children;
  for (int rank = 1; rank < kWorld; ++rank) {
    children.push_back(std::make_unique<Child>(std::vector<std::string>{
        "mesh", std::to_string(port), std::to_string(rank), std::to_string(kWorld)}));
  }
  const Group group = Group::rendezvous(endpoint, 0, kWorld, "127.0.0.1", port);
  std::vector<Future<void>> sends;
  for (int rank = 1; rank < kWorld; ++rank) {
    EXPECT_THAT(endpoint->peer_name(group.peer(rank)), HasSubstr("rank" + std::to_string(rank)));
    sends.push_back(endpoint->send(testing::mesh_tensor(0, rank), group.peer(rank), 2));
  }
  for (int rank = 1; rank < kWorld; ++rank) {
    EXPECT_ALL_CLOSE(endpoint->recv(group.peer(rank), 2).get(), testing::mesh_tensor(rank, 0), 0.0,
                     0.0);
  }
  for (int rank = 1; rank < kWorld; ++rank) {
    const Tensor report = endpoint->recv(group.peer(rank), 1).get();
    EXPECT_EQ(report[0].item<int64_t>(), rank);
    EXPECT_EQ(report[1].item<int64_t>(), kWorld - 1) << "rank " << rank << " got a wrong tensor";
  }
  for (auto& s : sends) s.wait();
  for (int rank = 1; rank < kWorld; ++rank) endpoint->send(zeros({1}), group.peer(rank), 3).wait();
  for (auto& child : children) EXPECT_EQ(child->wait(), 0);
}

// A peer killed while this process waits for it: the wait ends with an error naming the peer,
// well before the timeout.
TEST_P(TransportProcesses, AKilledPeerFailsThePendingReceiveNamingIt) {
  Endpoint endpoint(options());
  const uint16_t port = endpoint.listen();
  Child child({"idle", std::to_string(port)});
  const PeerId peer = endpoint.accept();
  auto pending = endpoint.recv(peer, 0);
  kill(child.pid(), SIGKILL);
  const auto start = std::chrono::steady_clock::now();
  const std::string error = ferry::testing::error_of<TransportError>([&] { pending.wait(); });
  EXPECT_THAT(error, HasSubstr("peer idle-peer (127.0.0.1:"));
  EXPECT_THAT(error, HasSubstr("is gone"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 25s);
}

// GPipe with its two partitions in two processes (this one rank 0, a transport_peer rank 1):
// two steps' gradients, and the loss, equal the unpipelined module's, for every checkpoint mode.
class GPipeAcrossProcesses : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (peer_program() == nullptr) GTEST_SKIP() << "FERRY_TRANSPORT_PEER is not set (run ctest)";
    sim::reset_config();  // chaos in this process too (the child reads its environment)
  }
  void TearDown() override { sim::reset_config(); }
  ScopedEnv secret_{"FERRY_TRANSPORT_SECRET", "gpipe-secret"};
  ScopedEnv chaos_{"FERRY_SIM_CHAOS",
                   std::to_string(ferry::testing::test_seed() % 100000) + ":200us"};
};

TEST_P(GPipeAcrossProcesses, TrainingStepsGiveTheUnpipelinedGradients) {
  SCOPED_TRACE(ferry::testing::seed_trace());
  const uint64_t seed = ferry::testing::test_seed();
  nn::Sequential reference = testing::gpipe_case_model(seed);
  Tensor expected_loss = zeros({});
  for (int step = 0; step < testing::kGPipeCaseSteps; ++step) {
    const auto [x, target] = testing::gpipe_case_data(seed, step);
    const Tensor loss = mse_loss(reference->forward(x), target);
    loss.backward();
    expected_loss = expected_loss.add(loss.detach());
  }

  EndpointOptions o;
  o.name = "gpipe-rank0";
  o.timeout = 30s;
  auto endpoint = std::make_shared<Endpoint>(o);
  const uint16_t port = endpoint->listen();
  Child child({"gpipe", std::to_string(port), std::to_string(seed), GetParam()});
  auto group = std::make_shared<Group>(Group::rendezvous(endpoint, 0, 2, "127.0.0.1", port));
  nn::Sequential model = testing::gpipe_case_model(seed);
  pipeline::GPipe pipe(model, testing::kGPipeCaseBalance, testing::kGPipeCasePlacements,
                       testing::kGPipeCaseChunks, group, GetParam());
  EXPECT_EQ(pipe.first_partition(), 0);
  EXPECT_EQ(pipe.last_partition(), 0);
  for (int step = 0; step < testing::kGPipeCaseSteps; ++step) {
    const auto [x, target] = testing::gpipe_case_data(seed, step);
    const Tensor root = pipe.forward(x.to(Device("sim:0")));
    EXPECT_EQ(root.numel(), 1);  // not the last rank: a scalar zero to run backward from
    root.backward();
  }
  const Tensor loss = endpoint->recv(group->peer(1), 100).get();
  EXPECT_ALL_CLOSE(loss, expected_loss, 1e-5, 1e-6);
  const auto want = reference->named_parameters();
  std::vector<Tensor> got = pipe.parameters();  // rank 0's: the first partition's
  const size_t own = got.size();
  for (size_t k = own; k < want.size(); ++k) got.push_back(Tensor());  // rank 1's, below
  for (size_t k = 0; k < want.size(); ++k) {
    SCOPED_TRACE(want.items()[k].key());
    const Tensor grad =
        k < own ? got[k].grad() : endpoint->recv(group->peer(1), 101 + (k - own)).get();
    ASSERT_TRUE(grad.defined());
    EXPECT_ALL_CLOSE(grad.to(kCPU), want.items()[k].value().grad(), 1e-4, 1e-6);
  }
  endpoint->send(zeros({1}), group->peer(1), 99).wait();
  EXPECT_EQ(child.wait(), 0);
}

// `ferry train-ranks`, as the README runs it: two ranks, and the last one's losses equal the
// one-process run's at every step. Rank 0 takes a free port (port 0) and prints it; rank 1 is
// pointed there, so that no port chosen here can be taken already.
TEST(TrainRanksCommand, TwoRanksTrainAsOneProcess) {
  const char* tool = std::getenv("FERRY_TOOL");
  if (tool == nullptr) GTEST_SKIP() << "FERRY_TOOL is not set (run ctest)";
  ScopedEnv secret("FERRY_TRANSPORT_SECRET", "train-ranks-secret");
  const std::string common = " train-ranks --ranks 2 --steps 4 --address 127.0.0.1:";
  FILE* rank0 =
      popen(("timeout 120 " + std::string(tool) + common + "0 --rank 0 2>&1").c_str(), "r");
  ASSERT_NE(rank0, nullptr);
  std::string rank0_out, port;
  char line[4096];
  const std::string listening = "listening at 127.0.0.1:";
  while (port.empty() && std::fgets(line, sizeof(line), rank0) != nullptr) {
    rank0_out += line;
    const std::string text = line;
    const size_t at = text.find(listening);
    if (at != std::string::npos)
      port = std::to_string(std::stoi(text.substr(at + listening.size())));
  }
  ASSERT_FALSE(port.empty()) << "rank 0 printed no port:\n"
                             << rank0_out << " (exit " << pclose(rank0) << ")";
  std::string out;
  FILE* rank1 =
      popen(("timeout 120 " + std::string(tool) + common + port + " --rank 1 2>&1").c_str(), "r");
  ASSERT_NE(rank1, nullptr);
  while (size_t n = fread(line, 1, sizeof(line), rank1)) out.append(line, n);
  const int rc1 = pclose(rank1);
  EXPECT_EQ(WIFEXITED(rc1) ? WEXITSTATUS(rc1) : -1, 0) << out;
  EXPECT_THAT(out, HasSubstr("every step's loss matches the one-process run")) << out;
  while (size_t n = fread(line, 1, sizeof(line), rank0)) rank0_out.append(line, n);
  const int rc0 = pclose(rank0);
  EXPECT_EQ(WIFEXITED(rc0) ? WEXITSTATUS(rc0) : -1, 0) << rank0_out;
}

INSTANTIATE_TEST_SUITE_P(CheckpointModes, GPipeAcrossProcesses,
                         ::testing::Values("always", "except_last", "never"));

INSTANTIATE_TEST_SUITE_P(Transports, TransportProcesses,
                         ::testing::Values(Transport{"tcp", "tcp", "tcp/lo"},
                                           Transport{"shared_memory", "sm,tcp", "sysv/memory"},
                                           // the rendezvous payloads read in place (cma)
                                           Transport{"shared_memory_single_copy", "sm,tcp",
                                                     "cma/memory", true}),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace ferry::transport
