// Switching behind ferry serve (SwitchingHandler), over real sockets: with room for one or two
// models per device, switched runs answer bitwise what the same model run directly answers, also
// after an eviction and a second switch-in; the least recently used model is evicted first; a
// model running a request is never evicted; many clients over many models at once; a model too
// big for every device is refused at startup naming the sizes; BERT switched with its attention
// mask and token types gives the resident model's outputs. Every wait is bounded.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "ferry/ferry.h"
#include "ferry/nn/models.h"
#include "ferry/switch/client.h"
#include "ferry/switch/model_config.h"
#include "ferry/switch/served_model.h"
#include "ferry/switch/server.h"
#include "ferry/switch/switching_handler.h"
#include "tests/support/random.h"
#include "tests/switch/direct_model.h"
#include "tests/switch/switch_test_util.h"

namespace ferry::switch_ {
namespace {

using testing::bytes_of;
using testing::DirectModel;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::request_for;
using testing::same_tensor;
using testing::switch_config;
using testing::TempDir;

class SwitchServe : public ::testing::Test, public testing::DirectOutputs {
 protected:
  void serve(const std::vector<std::string>& names, std::vector<Device> devices,
             uint64_t resident_bytes, SwitchingOptions switching = {}) {
    config = switch_config(names);
    switching.resident_bytes = resident_bytes;
    switching.profile_shape = {1, 32, 8};
    switching.profile_repeats = 1;
    switching.on_switch = [this](const SwitchEvent& e) {
      std::lock_guard lock(events_mutex);
      events.push_back(e);
    };
    handler = std::make_shared<SwitchingHandler>(config, std::move(devices), switching);
    ServerOptions options;
    options.socket_path = dir.file("ferry.sock");
    server = std::make_unique<Server>(options, handler);
  }
  std::vector<std::string> switched_models() {
    std::lock_guard lock(events_mutex);
    std::vector<std::string> names;
    for (const SwitchEvent& e : events) names.push_back(e.model);
    return names;
  }

  TempDir dir;
  std::shared_ptr<SwitchingHandler> handler;
  std::unique_ptr<Server> server;
  std::mutex events_mutex;
  std::vector<SwitchEvent> events;
};

TEST_F(SwitchServe, SwitchedOutputsEqualTheModelRunDirectlyAfterEvictions) {
  SCOPED_TRACE(::ferry::testing::seed_trace());
  Generator gen(::ferry::testing::test_seed());
  // Room for the ResNet alone, or for the small models together: each round switches every
  // model in again.
  serve({"a", "text", "vision", "wide"}, {Device("sim:0")}, bytes_of("vision"));
  Client client(server->socket_path());
  for (int round = 0; round < 2; ++round) {
    for (const char* name : {"vision", "a", "text", "wide"}) {
      expect_direct_outputs(client, name, gen);
    }
  }
  // Every model was evicted and switched in again in the second round.
  const std::vector<std::string> switched = switched_models();
  std::map<std::string, int> count;
  for (const std::string& name : switched) ++count[name];
  EXPECT_EQ(count["vision"], 2);
  EXPECT_GE(count["a"], 2);
  EXPECT_GE(count["text"], 2);
  EXPECT_GE(count["wide"], 2);
  EXPECT_EQ(handler->switch_count(), switched.size());
}

TEST_F(SwitchServe, LayersReadInPlaceGiveTheDirectModelsOutputs) {
  SCOPED_TRACE(::ferry::testing::seed_trace());
  Generator gen(::ferry::testing::test_seed());
  SwitchingOptions switching;
  switching.direct_access = DirectAccess::kAll;  // every layer with weights reads them in place
  // Room for about one model at a time: most requests switch.
  serve({"a", "text", "wide"}, {Device("sim:0")}, std::max(bytes_of("text"), bytes_of("wide")),
        switching);
  const Grouping plan = handler->grouping("text", Device("sim:0"));
  EXPECT_FALSE(plan.ends.empty());
  Client client(server->socket_path());
  for (const char* name : {"text", "wide", "a", "text"}) expect_direct_outputs(client, name, gen);
  EXPECT_EQ(handler->switch_count(), switched_models().size());
}

TEST_F(SwitchServe, TheLeastRecentlyUsedModelIsEvictedFirst) {
  serve({"a", "b", "c"}, {Device("sim:0")}, 2 * bytes_of("a"));
  // Preloaded in order a, b; c does not fit.
  EXPECT_THAT(handler->resident_models(Device("sim:0")), ElementsAre("a", "b"));
  EXPECT_FALSE(handler->resident_device("c"));
  Generator gen(::ferry::testing::test_seed());
  Client client(server->socket_path());
  expect_direct_outputs(client, "a", gen);  // b is now the least recently used
  expect_direct_outputs(client, "c", gen);
  EXPECT_THAT(handler->resident_models(Device("sim:0")), ElementsAre("a", "c"));
  expect_direct_outputs(client, "b", gen);  // evicts a
  EXPECT_THAT(handler->resident_models(Device("sim:0")), ElementsAre("c", "b"));
  std::lock_guard lock(events_mutex);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].model, "c");
  EXPECT_THAT(events[0].evicted, ElementsAre("b"));
  EXPECT_EQ(events[1].model, "b");
  EXPECT_THAT(events[1].evicted, ElementsAre("a"));
  EXPECT_GE(events[1].groups, 1u);
}

TEST_F(SwitchServe, AModelRunningARequestIsNeverEvicted) {
  // Room for one model: a runs (held at a gate) while b is requested for the same device.
  std::mutex gate_mutex;
  std::condition_variable gate_changed;
  bool a_entered = false, gate_open = false;
  SwitchingOptions switching;
  switching.before_run = [&](const std::string& name) {
    if (name != "a") return;
    std::unique_lock lock(gate_mutex);
    a_entered = true;
    gate_changed.notify_all();
    gate_changed.wait_for(lock, std::chrono::seconds(10), [&] { return gate_open; });
  };
  serve({"a", "b"}, {Device("sim:0")}, bytes_of("a"), switching);
  ASSERT_EQ(handler->resident_device("a"), Device("sim:0"));
  Generator gen(::ferry::testing::test_seed());
  auto held = std::async(std::launch::async, [&] {
    Client client(server->socket_path());
    Generator own(1);
    expect_direct_outputs(client, "a", own);
  });
  {
    std::unique_lock lock(gate_mutex);
    ASSERT_TRUE(gate_changed.wait_for(lock, std::chrono::seconds(10), [&] { return a_entered; }));
  }
  auto other = std::async(std::launch::async, [&] {
    Client client(server->socket_path());
    Generator own(2);
    expect_direct_outputs(client, "b", own);
  });
  // b waits for the device; a stays resident while its request runs.
  EXPECT_NE(other.wait_for(std::chrono::milliseconds(300)), std::future_status::ready);
  EXPECT_EQ(handler->resident_device("a"), Device("sim:0"));
  EXPECT_FALSE(handler->resident_device("b"));
  {
    std::lock_guard lock(gate_mutex);
    gate_open = true;
  }
  gate_changed.notify_all();
  ASSERT_EQ(held.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  ASSERT_EQ(other.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  held.get();
  other.get();
  EXPECT_THAT(handler->resident_models(Device("sim:0")), ElementsAre("b"));
}

TEST_F(SwitchServe, ManyClientsOverManyModelsConcurrently) {
  SCOPED_TRACE(::ferry::testing::seed_trace());
  // Room for about one and a half small models per device, four models, six clients.
  serve({"a", "b", "c", "wide"}, {Device("sim:0"), Device("sim:1")},
        bytes_of("wide") + bytes_of("a") / 2);
  const std::vector<std::string> names = {"a", "b", "c", "wide"};
  std::vector<std::unique_ptr<DirectModel>> direct;
  for (const std::string& name : names)
    direct.push_back(std::make_unique<DirectModel>(model(name)));
  // Inputs and expected outputs first, so the clients only talk to the server.
  struct Job {
    std::string model;
    std::vector<NamedTensor> inputs;
    std::vector<Tensor> expected;
  };
  constexpr int kClients = 6, kPerClient = 8;
  std::vector<std::vector<Job>> jobs(kClients);
  std::mt19937_64 rng = ::ferry::testing::test_rng();
  Generator gen(rng());
  for (auto& list : jobs) {
    for (int i = 0; i < kPerClient; ++i) {
      const size_t m = rng() % names.size();
      Job job{names[m], request_for(model(names[m]), gen), {}};
      job.expected = direct[m]->run(job.inputs);
      list.push_back(std::move(job));
    }
  }
  std::atomic<int> equal{0}, failed{0};
  std::vector<std::thread> clients;
  for (int k = 0; k < kClients; ++k) {
    clients.emplace_back([&, k] {
      try {
        Client client(server->socket_path());
        for (const Job& job : jobs[k]) {
          const InferResult r = client.infer(job.model, job.inputs);
          if (r.outputs.size() == 1 && same_tensor(r.outputs[0].tensor, job.expected[0])) {
            ++equal;
          } else {
            ++failed;
          }
        }
      } catch (const Error&) {
        ++failed;
      }
    });
  }
  for (std::thread& t : clients) t.join();  // each request is bounded by the client's timeouts
  EXPECT_EQ(equal.load(), kClients * kPerClient);
  EXPECT_EQ(failed.load(), 0);
  EXPECT_GT(handler->switch_count(), 0u);
}

TEST_F(SwitchServe, AModelTooBigForEveryDeviceIsRefusedAtStartup) {
  const uint64_t wide = bytes_of("wide");
  try {
    serve({"a", "wide"}, {Device("sim:0"), Device("sim:1")}, wide - 1);
    FAIL() << "expected a SwitchError";
  } catch (const SwitchError& e) {
    EXPECT_EQ(e.code(), ErrorCode::too_large);
    EXPECT_THAT(e.what(), HasSubstr("model 'wide' needs " + std::to_string(wide) + " bytes"));
    EXPECT_THAT(e.what(), HasSubstr("sim:1: " + std::to_string(wide - 1) + " bytes"));
  }
}

TEST_F(SwitchServe, BertSwitchedWithItsMaskGivesTheResidentOutputs) {
  SCOPED_TRACE(::ferry::testing::seed_trace());
  Generator gen(::ferry::testing::test_seed());
  // Room for one of them: a is preloaded, text switches in, runs resident, is evicted by a and
  // switches in again.
  serve({"a", "text"}, {Device("sim:0")}, bytes_of("text"));
  Client client(server->socket_path());
  const std::vector<NamedTensor> inputs = request_for(model("text"), gen);
  const InferResult first = client.infer("text", inputs);
  const InferResult resident = client.infer("text", inputs);
  expect_direct_outputs(client, "a", gen);
  const InferResult switched = client.infer("text", inputs);
  EXPECT_THAT(switched_models(), ElementsAre("text", "a", "text"));
  const std::vector<Tensor> expected = DirectModel(model("text")).run(inputs);
  for (const InferResult* r : {&first, &resident, &switched}) {
    ASSERT_EQ(r->outputs.size(), 2u);
    for (size_t i = 0; i < 2; ++i) EXPECT_TRUE(same_tensor(r->outputs[i].tensor, expected[i])) << i;
  }
  EXPECT_EQ(switched.outputs[0].name, "last_hidden_state");
  EXPECT_EQ(switched.outputs[1].name, "pooler_output");
  // The mask matters: without it the answer differs.
  const InferResult unmasked = client.infer("text", {inputs[0], inputs[2]});
  EXPECT_FALSE(same_tensor(unmasked.outputs[0].tensor, expected[0]));
}

}  // namespace
}  // namespace ferry::switch_
