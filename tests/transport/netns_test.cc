// The transport across "hosts": two network namespaces joined by a veth pair, created by the test
// (it needs root and `ip`; skipped otherwise, saying why), a transport_peer echoing in one and
// another sending random tensors from the other, over TCP on the veth link (UCX_TLS=tcp, each
// side's UCX restricted to its veth device), and a group of three ranks spread over both.
// Namespaces are removed whatever happens; every process is bounded in time.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/random.h"

namespace {

using namespace std::chrono_literals;

const char* peer_program() { return std::getenv("FERRY_TRANSPORT_PEER"); }

bool run_quietly(const std::string& command) {
  return std::system((command + " >/dev/null 2>&1").c_str()) == 0;
}

class NetworkNamespaces : public ::testing::Test {
 protected:
  void SetUp() override {
    if (peer_program() == nullptr) GTEST_SKIP() << "FERRY_TRANSPORT_PEER is not set (run ctest)";
    if (geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
    if (!run_quietly("ip -V")) GTEST_SKIP() << "needs the `ip` tool (iproute2)";
    const std::string id = std::to_string(getpid() % 100000);
    a_ = "ferry" + id + "a";
    b_ = "ferry" + id + "b";
    const bool made = run_quietly("ip netns add " + a_) && run_quietly("ip netns add " + b_) &&
                      run_quietly("ip link add v" + a_ + " type veth peer name v" + b_) &&
                      run_quietly("ip link set v" + a_ + " netns " + a_) &&
                      run_quietly("ip link set v" + b_ + " netns " + b_) &&
                      run_quietly("ip -n " + a_ + " addr add 10.77.0.1/24 dev v" + a_) &&
                      run_quietly("ip -n " + b_ + " addr add 10.77.0.2/24 dev v" + b_) &&
                      run_quietly("ip -n " + a_ + " link set v" + a_ + " up") &&
                      run_quietly("ip -n " + b_ + " link set v" + b_ + " up") &&
                      run_quietly("ip -n " + a_ + " link set lo up") &&
                      run_quietly("ip -n " + b_ + " link set lo up");
    if (!made) GTEST_SKIP() << "could not create two network namespaces with a veth pair here";
  }
  void TearDown() override {
    if (!a_.empty()) run_quietly("ip netns del " + a_);
    if (!b_.empty()) run_quietly("ip netns del " + b_);
  }
  // `ip netns exec ns env UCX... peer args`, bounded; returns the exit status and output.
  std::string in_namespace(const std::string& ns, const std::string& args) const {
    return "timeout 60 ip netns exec " + ns + " env UCX_TLS=tcp UCX_NET_DEVICES=v" + ns +
           " FERRY_TRANSPORT_SECRET=netns-secret " + peer_program() + " " + args;
  }
  std::string a_, b_;
};

TEST_F(NetworkNamespaces, TensorsCrossAVethLinkBetweenNamespaces) {
  SCOPED_TRACE(ferry::testing::seed_trace());
  const int count = 6;
  std::string server_status;
  std::thread server([&] {
    const int rc = std::system(
        (in_namespace(a_, "net-server 10.77.0.1 47000 " + std::to_string(count)) + " 2>&1")
            .c_str());
    server_status = std::to_string(WIFEXITED(rc) ? WEXITSTATUS(rc) : -1);
  });
  const std::string client =
      in_namespace(b_, "net-client 10.77.0.1 47000 " + std::to_string(count) + " " +
                           std::to_string(ferry::testing::test_seed()));
  std::string out;
  FILE* pipe = popen((client + " 2>&1").c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof(buffer), pipe)) out.append(buffer, n);
  const int rc = pclose(pipe);
  server.join();
  EXPECT_EQ(WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, 0) << out;
  EXPECT_EQ(server_status, "0");
  // UCX's account of the client's connection: TCP over its veth device.
  EXPECT_NE(out.find("tcp/v" + b_), std::string::npos) << out;
}

// Three ranks on two "hosts": ranks 0 and 2 in the first namespace, rank 1 in the second. Rank 2
// reaches rank 1 at rank 1's own address (10.77.0.2), learned through rank 0, not at rank 0's.
TEST_F(NetworkNamespaces, AGroupSpansTwoNamespaces) {
  const struct {
    const std::string* ns;
    const char* self;
  } ranks[] = {{&a_, "10.77.0.1"}, {&b_, "10.77.0.2"}, {&a_, "10.77.0.1"}};
  std::vector<std::string> outputs(3);
  std::vector<int> statuses(3, -1);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      const std::string command =
          in_namespace(*ranks[r].ns,
                       "net-mesh 10.77.0.1 47100 " + std::to_string(r) + " 3 " + ranks[r].self) +
          " 2>&1";
      FILE* pipe = popen(command.c_str(), "r");
      if (pipe == nullptr) return;
      char buffer[4096];
      while (size_t n = fread(buffer, 1, sizeof(buffer), pipe)) outputs[r].append(buffer, n);
      const int rc = pclose(pipe);
      statuses[r] = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(statuses[r], 0) << "rank " << r << ":\n" << outputs[r];
    EXPECT_NE(outputs[r].find("exchanged with every rank"), std::string::npos) << outputs[r];
  }
}

}  // namespace
