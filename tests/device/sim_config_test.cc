// FERRY_SIM_* parsing: accepted forms, defaults, and errors that name the variable, the expected
// format and the value given.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "ferry/backends/sim/sim.h"
#include "ferry/core/error.h"

namespace ferry::testing {
namespace {

using namespace std::chrono_literals;
using sim::Link;
using sim::SimConfig;

SimConfig parse(const std::map<std::string, std::string>& env) {
  return SimConfig::from_env([&](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

std::string config_error_of(const std::map<std::string, std::string>& env) {
  try {
    parse(env);
  } catch (const DeviceError& e) {
    return e.what();
  }
  return "(no DeviceError)";
}

size_t link(Link l) { return static_cast<size_t>(l); }

TEST(SimConfigTest, Defaults) {
  const SimConfig c = parse({});
  EXPECT_EQ(c.devices, 2);
  EXPECT_EQ(c.memory, size_t{4} << 30);
  EXPECT_EQ(c.peer_mode, SimConfig::PeerMode::kAll);
  EXPECT_TRUE(c.peer_allowed(0, 1));
  for (int i = 0; i < sim::kNumLinks; ++i) {
    EXPECT_EQ(c.bandwidth[static_cast<size_t>(i)], 0.0);
    EXPECT_EQ(c.latency[static_cast<size_t>(i)], 0ns);
  }
  EXPECT_FALSE(c.chaos_seed.has_value());
  const auto settings = c.settings();
  const std::map<std::string, std::string> m(settings.begin(), settings.end());
  EXPECT_EQ(m.at("FERRY_SIM_DEVICES"), "2");
  EXPECT_EQ(m.at("FERRY_SIM_MEMORY"), "4G");
  EXPECT_EQ(m.at("FERRY_SIM_PEER"), "all");
  EXPECT_EQ(m.at("FERRY_SIM_BANDWIDTH"), "none");
  EXPECT_EQ(m.at("FERRY_SIM_LATENCY"), "none");
  EXPECT_EQ(m.at("FERRY_SIM_CHAOS"), "off");
}

TEST(SimConfigTest, Sizes) {
  EXPECT_EQ(sim::parse_memory_size("4096"), 4096u);
  EXPECT_EQ(sim::parse_memory_size("512K"), 512u * 1024);
  EXPECT_EQ(sim::parse_memory_size("512M"), size_t{512} << 20);
  EXPECT_EQ(sim::parse_memory_size("8G"), size_t{8} << 30);
  EXPECT_EQ(sim::parse_memory_size("8g"), size_t{8} << 30);
  EXPECT_EQ(sim::parse_memory_size("1.5GiB"), size_t{3} << 29);
  EXPECT_EQ(sim::parse_memory_size("2GB"), size_t{2000000000});
  EXPECT_EQ(sim::parse_memory_size(" 1T "), size_t{1} << 40);
  for (const char* bad : {"", "lots", "G", "12Q", "-1G", "1e3", "5GiBs"}) {
    EXPECT_THROW(sim::parse_memory_size(bad), DeviceError) << bad;
  }
}

TEST(SimConfigTest, BandwidthsAndDurations) {
  EXPECT_EQ(sim::parse_bandwidth("12G"), 12e9);
  EXPECT_EQ(sim::parse_bandwidth("25GB/s"), 25e9);
  EXPECT_EQ(sim::parse_bandwidth("1GiB/s"), 1073741824.0);
  EXPECT_EQ(sim::parse_bandwidth("900M"), 900e6);
  EXPECT_EQ(sim::parse_bandwidth("none"), 0.0);
  EXPECT_THROW(sim::parse_bandwidth("fast"), DeviceError);
  EXPECT_EQ(sim::parse_duration("10us"), 10us);
  EXPECT_EQ(sim::parse_duration("1.5ms"), 1500us);
  EXPECT_EQ(sim::parse_duration("250ns"), 250ns);
  EXPECT_EQ(sim::parse_duration("2s"), 2s);
  EXPECT_EQ(sim::parse_duration("0"), 0ns);
  for (const char* bad : {"10", "10 parsecs", "ms", "-5us"}) {
    EXPECT_THROW(sim::parse_duration(bad), DeviceError) << bad;
  }
}

TEST(SimConfigTest, EveryVariable) {
  const SimConfig c = parse({{"FERRY_SIM_DEVICES", "3"},
                             {"FERRY_SIM_MEMORY", "512M"},
                             {"FERRY_SIM_PEER", "1,1,0; 0,1,0; 1,1,1"},
                             {"FERRY_SIM_BANDWIDTH", "12G,peer=50G"},
                             {"FERRY_SIM_LATENCY", "h2d=10us,d2h=20us"},
                             {"FERRY_SIM_CHAOS", "42:200us"}});
  EXPECT_EQ(c.devices, 3);
  EXPECT_EQ(c.memory, size_t{512} << 20);
  EXPECT_EQ(c.peer_mode, SimConfig::PeerMode::kMatrix);
  EXPECT_TRUE(c.peer_allowed(0, 1));
  EXPECT_FALSE(c.peer_allowed(0, 2));
  EXPECT_FALSE(c.peer_allowed(1, 0));
  EXPECT_TRUE(c.peer_allowed(2, 1));
  EXPECT_EQ(c.bandwidth[link(Link::HostToDevice)], 12e9);
  EXPECT_EQ(c.bandwidth[link(Link::Peer)], 50e9);
  EXPECT_EQ(c.latency[link(Link::HostToDevice)], 10us);
  EXPECT_EQ(c.latency[link(Link::DeviceToHost)], 20us);
  EXPECT_EQ(c.latency[link(Link::DeviceToDevice)], 0ns);
  ASSERT_TRUE(c.chaos_seed.has_value());
  EXPECT_EQ(*c.chaos_seed, 42u);
  EXPECT_EQ(c.chaos_max_delay, 200us);

  // settings() prints values that parse back to the same config.
  std::map<std::string, std::string> env;
  for (const auto& [k, v] : c.settings()) env[k] = v;
  EXPECT_EQ(env["FERRY_SIM_BANDWIDTH"], "h2d=12G,d2h=12G,d2d=12G,peer=50G");
  const SimConfig again = parse(env);
  EXPECT_EQ(again.settings(), c.settings());

  EXPECT_EQ(parse({{"FERRY_SIM_PEER", "none"}}).peer_mode, SimConfig::PeerMode::kNone);
  EXPECT_FALSE(parse({{"FERRY_SIM_PEER", "none"}}).peer_allowed(1, 0));
  EXPECT_FALSE(parse({{"FERRY_SIM_CHAOS", "off"}}).chaos_seed.has_value());
  EXPECT_EQ(parse({{"FERRY_SIM_CHAOS", "7"}}).chaos_seed, 7u);
  EXPECT_EQ(parse({{"FERRY_SIM_DEVICES", "0"}}).devices, 0);
  EXPECT_EQ(parse({{"FERRY_SIM_MEMORY", ""}}).memory, size_t{4} << 30);  // empty: unset
}

TEST(SimConfigTest, BadValuesNameTheVariableAndTheValue) {
  struct Case {
    const char* name;
    const char* value;
    const char* expected;
  };
  const Case cases[] = {
      {"FERRY_SIM_DEVICES", "two", "between 0 and 64"},
      {"FERRY_SIM_DEVICES", "65", "between 0 and 64"},
      {"FERRY_SIM_MEMORY", "lots", "a size such as"},
      {"FERRY_SIM_PEER", "1,0;0", "entries in every row"},
      {"FERRY_SIM_PEER", "1,0;0,1;1,1", "expected 2 rows"},
      {"FERRY_SIM_PEER", "yes", "rows of 0/1"},
      {"FERRY_SIM_BANDWIDTH", "pcie=12G", "link name h2d, d2h, d2d or peer"},
      {"FERRY_SIM_BANDWIDTH", "quick", "bytes per second"},
      {"FERRY_SIM_LATENCY", "10", "a duration such as"},
      {"FERRY_SIM_CHAOS", "maybe", "a seed such as 42"},
      {"FERRY_SIM_CHAOS", "1:forever", "a duration such as"},
  };
  for (const Case& c : cases) {
    const std::string message = config_error_of({{c.name, c.value}});
    EXPECT_NE(message.find(c.name), std::string::npos) << message;
    // A bad delay in "seed:delay" is quoted on its own.
    const std::string value(c.value);
    const std::string quoted =
        value.substr(value.find(':') == std::string::npos ? 0 : value.find(':') + 1);
    EXPECT_NE(message.find("\"" + quoted + "\""), std::string::npos) << message;
    EXPECT_NE(message.find(c.expected), std::string::npos) << message;
  }
}

TEST(SimConfigTest, ValidateRejectsInconsistentConfigs) {
  SimConfig c;
  c.peer_mode = SimConfig::PeerMode::kMatrix;
  c.peer_matrix = {{true}};
  EXPECT_THROW(c.validate(), DeviceError);
  c.peer_matrix = {{true, false}, {false, true}};
  c.validate();
  c.memory = 10;
  EXPECT_THROW(c.validate(), DeviceError);
  SimConfig d;
  d.devices = -1;
  EXPECT_THROW(sim::configure(d), DeviceError);
}

}  // namespace
}  // namespace ferry::testing
