// `ferry serve` over worker processes (WorkerPoolHandler), with real `ferry switch-worker`
// processes (FERRY_TOOL, set by ctest): every model, switched in by a worker or resident there,
// answers bitwise what the model built directly from the zoo answers; residency is bounded by the
// workers and by the parameters area, evicting the least recently used model; the workers map
// the one shared copy of the weights; a worker killed mid-request or while idle fails only the
// request it held and is replaced; many clients at once; shutdown reaps every worker. Every wait
// is bounded.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include "ferry/ferry.h"
#include "ferry/switch/client.h"
#include "ferry/switch/server.h"
#include "ferry/switch/worker_pool.h"
#include "tests/support/random.h"
#include "tests/support/tool.h"
#include "tests/switch/direct_model.h"
#include "tests/switch/switch_test_util.h"

namespace ferry::switch_ {
namespace {

using testing::bytes_of;
using testing::DirectModel;
using ::testing::HasSubstr;
using testing::request_for;
using testing::same_tensor;
using testing::switch_config;
using testing::TempDir;

using namespace std::chrono_literals;

bool process_alive(pid_t pid) { return pid > 0 && ::kill(pid, 0) == 0; }

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class WorkerPool : public ::testing::Test, public testing::DirectOutputs {
 protected:
  void SetUp() override { FERRY_SKIP_WITHOUT_TOOL(); }

  void serve(const std::vector<std::string>& names, std::vector<Device> devices, size_t standby,
             uint64_t resident_bytes, WorkerPoolOptions pool = {}) {
    config = switch_config(names);
    pool.worker_program = ::ferry::testing::ferry_tool();
    pool.standby = standby;
    pool.resident_bytes = resident_bytes;
    pool.workspace_bytes = 64 << 20;
    pool.profile_shape = {1, 32, 8};
    pool.profile_repeats = 1;
    pool.worker_start_timeout = 60s;
    pool.reply_timeout = 60s;
    handler = std::make_shared<WorkerPoolHandler>(config, std::move(devices), pool);
    ServerOptions options;
    options.socket_path = dir.file("ferry.sock");
    server = std::make_unique<Server>(options, handler);
  }
  std::vector<pid_t> pids() const {
    std::vector<pid_t> out;
    for (const WorkerInfo& w : handler->workers()) out.push_back(w.pid);
    return out;
  }
  size_t resident_count() const {
    size_t n = 0;
    for (const WorkerInfo& w : handler->workers()) n += w.model.empty() ? 0 : 1;
    return n;
  }

  TempDir dir;
  std::shared_ptr<WorkerPoolHandler> handler;
  std::unique_ptr<Server> server;
};

TEST_F(WorkerPool, EveryModelAnswersAsTheDirectModelSwitchedInOrResident) {
  SCOPED_TRACE(::ferry::testing::seed_trace());
  Generator gen(::ferry::testing::test_seed());
  serve({"a", "b", "text", "wide"}, {Device("sim:0")}, /*standby=*/1, /*resident=*/0);
  EXPECT_EQ(handler->workers().size(), 2u);
  for (pid_t pid : pids()) EXPECT_TRUE(process_alive(pid));
  Client client(server->socket_path());
  // Four models, two workers: every round switches; the repeats hit a resident model.
  for (const char* name : {"a", "a", "text", "wide", "wide", "b", "text", "a"}) {
    expect_direct_outputs(client, name, gen);
    EXPECT_LE(resident_count(), 2u);
  }
  EXPECT_EQ(handler->switch_count(), 6u);
  EXPECT_EQ(handler->restart_count(), 0u);
}

TEST_F(WorkerPool, TheLeastRecentlyUsedModelLeavesWhenEveryWorkerHoldsOne) {
  SCOPED_TRACE(::ferry::testing::seed_trace());
  Generator gen(::ferry::testing::test_seed());
  serve({"a", "b", "c"}, {Device("sim:0")}, /*standby=*/1, /*resident=*/0);
  Client client(server->socket_path());
  for (const char* name : {"a", "b", "a", "c"}) expect_direct_outputs(client, name, gen);
  EXPECT_TRUE(handler->resident_device("a").has_value());
  EXPECT_FALSE(handler->resident_device("b").has_value());
  EXPECT_TRUE(handler->resident_device("c").has_value());
}

TEST_F(WorkerPool, TheParametersAreaBoundsResidency) {
  SCOPED_TRACE(::ferry::testing::seed_trace());
  Generator gen(::ferry::testing::test_seed());
  const uint64_t one = (bytes_of("a") + 511) / 512 * 512;
  serve({"a", "b"}, {Device("sim:0")}, /*standby=*/2, /*resident=*/one + 512);
  EXPECT_EQ(handler->params_capacity(Device("sim:0")), one + 512);
  Client client(server->socket_path());
  for (const char* name : {"a", "b", "a", "b"}) {
    expect_direct_outputs(client, name, gen);
    EXPECT_EQ(resident_count(), 1u);
  }
  EXPECT_EQ(handler->switch_count(), 4u);
  for (const WorkerInfo& w : handler->workers()) {
    if (!w.model.empty()) {
      EXPECT_EQ(w.params_offset, 0u);
      EXPECT_EQ(w.params_size, one);
    }
  }
}

TEST_F(WorkerPool, WorkersMapTheOneSharedCopyOfTheWeights) {
  serve({"a", "wide"}, {Device("sim:0")}, /*standby=*/1, /*resident=*/0);
  for (pid_t pid : pids()) {
    const std::string maps = read_text("/proc/" + std::to_string(pid) + "/maps");
    EXPECT_THAT(maps, HasSubstr("ferry-weights-a")) << "worker " << pid;
    EXPECT_THAT(maps, HasSubstr("ferry-weights-wide")) << "worker " << pid;
  }
}

TEST_F(WorkerPool, AWorkerKilledMidRequestFailsOnlyThatRequestAndIsReplaced) {
  SCOPED_TRACE(::ferry::testing::seed_trace());
  Generator gen(::ferry::testing::test_seed());
  std::atomic<bool> kill_next{false};
  WorkerPoolOptions pool;
  pool.after_send = [&](pid_t pid) {
    if (kill_next.exchange(false)) ::kill(pid, SIGKILL);
  };
  // Slow workers (a 200 kB/s link, 500 kFLOP/s: the small BERT runs for about a second, the
  // wide MLP's weights take about 0.4 s to arrive), so that the run or the switch is still going
  // when the kill arrives, however slowly this process gets from the send to the kill.
  pool.worker_environment["FERRY_SIM_BANDWIDTH"] = "200K";
  pool.worker_environment["FERRY_SIM_COMPUTE"] = "500K";
  serve({"text", "wide"}, {Device("sim:0")}, /*standby=*/1, /*resident=*/0, pool);
  Client client(server->socket_path());
  expect_direct_outputs(client, "text", gen);  // resident in a worker now
  for (bool switching : {false, true}) {
    SCOPED_TRACE(switching ? "mid-switch" : "mid-request");
    const std::string name = switching ? "wide" : "text";
    const uint64_t restarts = handler->restart_count();
    kill_next = true;
    try {
      client.infer(name, request_for(model(name), gen));
      ADD_FAILURE() << "expected the request to fail";
    } catch (const SwitchError& e) {
      EXPECT_EQ(e.code(), ErrorCode::internal);
      EXPECT_THAT(e.what(), HasSubstr("was killed by signal 9"));
      EXPECT_THAT(e.what(), HasSubstr("model '" + name + "'"));
      if (switching) {
        EXPECT_THAT(e.what(), HasSubstr("(switching it in)"));
      }
    }
    EXPECT_FALSE(handler->resident_device(name).has_value());
    ASSERT_TRUE(testing::eventually([&] { return handler->restart_count() == restarts + 1; }, 60s));
    for (pid_t pid : pids()) EXPECT_TRUE(process_alive(pid));
    // The same connection goes on; the model is switched in again.
    expect_direct_outputs(client, name, gen);
  }
}

TEST_F(WorkerPool, AnIdleWorkerKilledIsReplaced) {
  SCOPED_TRACE(::ferry::testing::seed_trace());
  Generator gen(::ferry::testing::test_seed());
  std::vector<std::string> lines;
  std::mutex lines_mutex;
  WorkerPoolOptions pool;
  pool.log = [&](const std::string& line) {
    std::lock_guard lock(lines_mutex);
    lines.push_back(line);
  };
  serve({"a", "b"}, {Device("sim:0"), Device("sim:1")}, /*standby=*/1, /*resident=*/0, pool);
  Client client(server->socket_path());
  expect_direct_outputs(client, "a", gen);
  const std::vector<pid_t> before = pids();
  ::kill(before[0], SIGKILL);
  ASSERT_TRUE(testing::eventually([&] { return handler->restart_count() == 1; }, 60s));
  const std::vector<pid_t> after = pids();
  ASSERT_EQ(after.size(), before.size());
  EXPECT_NE(after[0], before[0]);
  EXPECT_FALSE(process_alive(before[0]));
  for (size_t i = 1; i < after.size(); ++i) EXPECT_EQ(after[i], before[i]);
  {
    std::lock_guard lock(lines_mutex);
    ASSERT_GE(lines.size(), 2u);
    EXPECT_THAT(lines[0], HasSubstr("was killed by signal 9 while idle"));
    EXPECT_THAT(lines[1], HasSubstr("in its place"));
  }
  for (const char* name : {"a", "b", "a"}) expect_direct_outputs(client, name, gen);
}

TEST_F(WorkerPool, ARequestThatFindsEveryDeviceBusyPreemptsARunBetweenLayers) {
  SCOPED_TRACE(::ferry::testing::seed_trace());
  Generator gen(::ferry::testing::test_seed());
  WorkerPoolOptions pool;
  pool.preempt = true;
  // The workers compute slowly (500 kFLOP/s: each of the small BERT's encoder layers takes some
  // 0.8 s), so that its run is still going when the other request arrives; outputs stay exact.
  pool.worker_environment["FERRY_SIM_COMPUTE"] = "500K";
  std::vector<std::string> lines;
  std::mutex lines_mutex;
  pool.log = [&](const std::string& line) {
    std::lock_guard lock(lines_mutex);
    lines.push_back(line);
  };
  std::atomic<int> sends{0};
  std::promise<void> long_run_sent;
  pool.after_send = [&](pid_t) {
    if (++sends == 2) long_run_sent.set_value();
  };
  serve({"text", "a"}, {Device("sim:0")}, /*standby=*/1, /*resident=*/0, pool);
  {
    Client client(server->socket_path());
    expect_direct_outputs(client, "text", gen);  // switched in: never preempted
  }
  using SteadyTime = std::chrono::steady_clock::time_point;
  auto long_run = std::async(std::launch::async, [&]() -> SteadyTime {
    Generator own(::ferry::testing::test_seed() + 1);
    Client client(server->socket_path());
    expect_direct_outputs(client, "text", own);  // resident: preemptible
    return std::chrono::steady_clock::now();
  });
  ASSERT_EQ(long_run_sent.get_future().wait_for(60s), std::future_status::ready);
  Client client(server->socket_path());
  expect_direct_outputs(client, "a", gen);
  const SteadyTime short_done = std::chrono::steady_clock::now();
  ASSERT_EQ(long_run.wait_for(120s), std::future_status::ready);
  const SteadyTime long_done = long_run.get();
  EXPECT_EQ(handler->preemption_count(), 1u);
  EXPECT_LT(short_done, long_done);
  {
    std::lock_guard lock(lines_mutex);
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_THAT(lines[0], HasSubstr("preempted model 'text' on sim:0"));
    EXPECT_THAT(lines[0], HasSubstr("of its 4 layers; it runs again"));
  }
  EXPECT_EQ(handler->restart_count(), 0u);
}

TEST_F(WorkerPool, LayersReadInPlaceFromTheSharedWeightsGiveTheDirectModelsOutputs) {
  SCOPED_TRACE(::ferry::testing::seed_trace());
  Generator gen(::ferry::testing::test_seed());
  WorkerPoolOptions pool;
  pool.direct_access = DirectAccess::kAll;  // every layer with weights reads them in place
  serve({"a", "text"}, {Device("sim:0")}, /*standby=*/0, /*resident=*/0, pool);
  Client client(server->socket_path());
  for (const char* name : {"text", "a", "text", "text", "a"})
    expect_direct_outputs(client, name, gen);
  EXPECT_EQ(handler->switch_count(), 4u);
}

TEST_F(WorkerPool, ManyClientsOverTwoDevices) {
  SCOPED_TRACE(::ferry::testing::seed_trace());
  serve({"a", "b", "c", "wide"}, {Device("sim:0"), Device("sim:1")}, /*standby=*/1,
        /*resident=*/0);
  std::vector<std::thread> clients;
  std::atomic<int> answered{0};
  for (int k = 0; k < 4; ++k) {
    clients.emplace_back([&, k] {
      Generator gen(::ferry::testing::test_seed() + k);
      Client client(server->socket_path());
      const std::vector<std::string> names = {"a", "b", "c", "wide"};
      for (int i = 0; i < 8; ++i) {
        expect_direct_outputs(client, names[(i * (k + 1)) % 4], gen);
        answered += 1;
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(answered.load(), 32);
  EXPECT_EQ(handler->restart_count(), 0u);
}

TEST_F(WorkerPool, BadInputIsAnsweredByTheControllerAndUnknownModelsListed) {
  serve({"a"}, {Device("sim:0")}, /*standby=*/0, /*resident=*/0);
  Client client(server->socket_path());
  try {
    client.infer("a", {{"x", zeros({2, 15})}});
    ADD_FAILURE() << "expected bad_input";
  } catch (const SwitchError& e) {
    EXPECT_EQ(e.code(), ErrorCode::bad_input);
    EXPECT_THAT(e.what(), HasSubstr("[*, 16]"));
  }
  try {
    client.infer("nope", {{"x", zeros({2, 16})}});
    ADD_FAILURE() << "expected unknown_model";
  } catch (const SwitchError& e) {
    EXPECT_EQ(e.code(), ErrorCode::unknown_model);
    EXPECT_THAT(e.what(), HasSubstr("this server has: a"));
  }
  EXPECT_EQ(handler->switch_count(), 0u);
}

TEST_F(WorkerPool, AModelLargerThanTheParametersAreaIsRefusedAtStartup) {
  try {
    serve({"a", "wide"}, {Device("sim:0")}, /*standby=*/0, /*resident=*/bytes_of("a") + 512);
    ADD_FAILURE() << "expected too_large";
  } catch (const SwitchError& e) {
    EXPECT_EQ(e.code(), ErrorCode::too_large);
    EXPECT_THAT(e.what(), HasSubstr("model 'wide'"));
    EXPECT_THAT(e.what(), HasSubstr("parameters area"));
  }
}

TEST_F(WorkerPool, ShutdownReapsEveryWorker) {
  serve({"a"}, {Device("sim:0"), Device("sim:1")}, /*standby=*/2, /*resident=*/0);
  const std::vector<pid_t> workers = pids();
  EXPECT_EQ(workers.size(), 6u);
  server->stop();
  server.reset();
  handler.reset();
  for (pid_t pid : workers) EXPECT_FALSE(process_alive(pid)) << pid;
}

}  // namespace
}  // namespace ferry::switch_
