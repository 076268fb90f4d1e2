// Weight sharing between controllers (ferry/switch/weight_share.h), in one process with one
// endpoint per side: a fetched model is bit for bit the holder's and reads no file; a different
// configuration, a dead holder or a dead directory falls back to the model's own file within the
// timeout; announced holders serve later fetchers; hostile requests are answered with errors and
// leave the share serving.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "ferry/ferry.h"
#include "ferry/nn/safetensors.h"
#include "ferry/switch/weight_share.h"
#include "tests/switch/switch_test_util.h"

namespace ferry::switch_ {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;
using transport::EndpointOptions;

EndpointOptions endpoint_options(const std::string& name) {
  EndpointOptions o;
  o.name = name;
  o.secret = "weights-secret";
  o.timeout = 10s;
  return o;
}

WeightShareOptions share_options(const std::string& name) {
  WeightShareOptions o;
  o.endpoint = endpoint_options(name);
  o.idle_timeout = 5s;
  return o;
}

ModelConfig mlp_config(uint64_t seed, std::vector<int64_t> hidden = {64, 32}) {
  ModelConfig c;
  c.name = "tiny";
  c.arch = "mlp";
  c.in_features = 16;
  c.hidden = std::move(hidden);
  c.out_features = 4;
  c.seed = seed;
  return c;
}

bool same_bytes(const ServedModel& a, const ServedModel& b) {
  return a.weight_bytes() == b.weight_bytes() &&
         std::memcmp(a.image().host().data_ptr(), b.image().host().data_ptr(), a.weight_bytes()) ==
             0;
}

// A loader through `fetcher` whose log lines land in `lines`.
ModelLoader logged_loader(std::shared_ptr<WeightFetcher> fetcher, std::vector<std::string>& lines) {
  return fetching_loader(std::move(fetcher),
                         [&lines](const std::string& l) { lines.push_back(l); });
}

std::string joined(const std::vector<std::string>& lines) {
  std::string all;
  for (const auto& l : lines) all += l + "\n";
  return all;
}

TEST(WeightsHash, SeesEveryByteAndTheLength) {
  const uint64_t seed = std::random_device{}();
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  std::vector<unsigned char> bytes(4099);
  for (auto& b : bytes) b = static_cast<unsigned char>(rng());
  const uint64_t h = weights_hash(bytes.data(), bytes.size());
  EXPECT_EQ(h, weights_hash(bytes.data(), bytes.size()));
  EXPECT_NE(h, weights_hash(bytes.data(), bytes.size() - 1));
  for (size_t at : {size_t{0}, size_t{7}, size_t{31}, size_t{32}, size_t{2048}, size_t{4095},
                    size_t{4096}, size_t{4098}}) {
    for (int bit = 0; bit < 8; bit += 3) {
      bytes[at] ^= static_cast<unsigned char>(1u << bit);
      EXPECT_NE(h, weights_hash(bytes.data(), bytes.size())) << "byte " << at << " bit " << bit;
      bytes[at] ^= static_cast<unsigned char>(1u << bit);
    }
  }
  // Two words swapped between lanes change it too.
  std::swap_ranges(bytes.begin(), bytes.begin() + 8, bytes.begin() + 8);
  std::vector<unsigned char> swapped = bytes;
  std::swap_ranges(swapped.begin(), swapped.begin() + 8, swapped.begin() + 8);
  EXPECT_NE(weights_hash(bytes.data(), bytes.size()), weights_hash(swapped.data(), swapped.size()));
}

TEST(ParseAddress, ChecksHostAndPort) {
  EXPECT_EQ(parse_address("10.0.0.2:7000"), std::pair(std::string("10.0.0.2"), uint16_t{7000}));
  EXPECT_EQ(parse_address("h:0", /*any_port=*/true).second, 0);
  for (const char* bad :
       {"", ":80", "host", "host:", "host:0", "host:65536", "host:8x", "h:123456"}) {
    EXPECT_THROW(parse_address(bad), transport::TransportError) << bad;
  }
}

TEST(WeightShare, AFetchedModelIsTheHoldersBitForBitAndReadsNoFile) {
  testing::TempDir dir;
  // The holder loads its weights from a file; the fetcher's configuration names a file of the
  // same name that does not exist on its side, so a model that builds came over the wire.
  ServedModel seeded(mlp_config(5));
  std::filesystem::create_directories(dir.file("holder"));
  safetensors::save(dir.file("holder/w.safetensors"), seeded.module().state_dict());
  ModelConfig holder_config = mlp_config(0);
  holder_config.weights = dir.file("holder/w.safetensors");
  ServedModel held(holder_config);
  ASSERT_TRUE(same_bytes(held, seeded));

  WeightShare share(share_options("holder"));
  share.offer(holder_config, held);
  auto fetcher =
      std::make_shared<WeightFetcher>("127.0.0.1", share.port(), endpoint_options("fetcher"));
  const auto entries = fetcher->list();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].model, "tiny");
  EXPECT_EQ(entries[0].weights_id, "file:w.safetensors");
  EXPECT_EQ(entries[0].nbytes, held.weight_bytes());
  EXPECT_EQ(entries[0].holders, std::vector<std::string>{""});

  ModelConfig fetcher_config = mlp_config(0);
  fetcher_config.weights = dir.file("fetcher/w.safetensors");
  std::vector<std::string> log;
  const auto model = logged_loader(fetcher, log)(fetcher_config, {});
  EXPECT_TRUE(same_bytes(*model, held));
  EXPECT_TRUE(model->image().host().is_pinned());
  EXPECT_NE(model->image().host().data_ptr(), held.image().host().data_ptr());
  EXPECT_THAT(joined(log), HasSubstr("weights fetched from 127.0.0.1:"));
  EXPECT_EQ(share.fetches_served(), 1u);
  // The module's parameters are views of the fetched image.
  const Tensor w = model->module().named_parameters()[0].value();
  EXPECT_TRUE(testing::same_tensor(w, seeded.module().named_parameters()[0].value()));
  EXPECT_EQ(w.storage().data(), model->image().host().storage().data());
}

TEST(WeightShare, AnotherConfigurationLoadsItsOwnWeights) {
  const ModelConfig config = mlp_config(5);
  ServedModel held(config);
  WeightShare share(share_options("holder"));
  share.offer(config, held);
  auto fetcher =
      std::make_shared<WeightFetcher>("127.0.0.1", share.port(), endpoint_options("fetcher"));

  std::vector<std::string> log;
  const auto other_seed = logged_loader(fetcher, log)(mlp_config(6), {});
  EXPECT_TRUE(same_bytes(*other_seed, ServedModel(mlp_config(6))));
  EXPECT_THAT(joined(log), HasSubstr("weights: expected seed:6, the holder has seed:5"));

  log.clear();
  const auto other_layout = logged_loader(fetcher, log)(mlp_config(5, {64, 48}), {});
  EXPECT_TRUE(same_bytes(*other_layout, ServedModel(mlp_config(5, {64, 48}))));
  EXPECT_THAT(joined(log), HasSubstr("image bytes: expected"));

  log.clear();
  ModelConfig renamed = config;
  renamed.name = "other";
  logged_loader(fetcher, log)(renamed, {});
  EXPECT_THAT(joined(log), HasSubstr("no holder of 'other'"));
  EXPECT_EQ(share.fetches_served(), 0u);
}

TEST(WeightShare, AnnouncedHoldersServeLaterFetchers) {
  const ModelConfig config = mlp_config(9);
  ServedModel held(config);
  WeightShare directory(share_options("directory"));
  directory.offer(config, held);

  // A second controller fetches, then offers what it fetched and announces it.
  auto first =
      std::make_shared<WeightFetcher>("127.0.0.1", directory.port(), endpoint_options("second"));
  std::vector<std::string> log;
  const auto copy = logged_loader(first, log)(config, {});
  WeightShare second(share_options("second-share"));
  second.offer(config, *copy);
  const std::string address = "127.0.0.1:" + std::to_string(second.port());
  first->announce(address, config, *copy);
  auto listed = directory.entries();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_THAT(listed[0].holders, ::testing::UnorderedElementsAre("", address));

  // Fetchers take turns over the holders.
  auto third =
      std::make_shared<WeightFetcher>("127.0.0.1", directory.port(), endpoint_options("third"));
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(same_bytes(*logged_loader(third, log)(config, {}), held));
  EXPECT_EQ(second.fetches_served(), 2u);
  EXPECT_EQ(directory.fetches_served(), 1u + 2u);

  // An announcement of other bytes under the same identity is refused.
  ServedModel impostor(mlp_config(10));
  try {
    first->announce(address, config, impostor);
    ADD_FAILURE() << "an announcement with another hash was accepted";
  } catch (const transport::TransportError& e) {
    EXPECT_THAT(e.what(), HasSubstr("not the same weights"));
  }
  EXPECT_THROW(first->announce("no-port", config, *copy), transport::TransportError);
}

TEST(WeightShare, DeadHoldersAndADeadDirectoryFallBackInTime) {
  const ModelConfig config = mlp_config(3);
  ServedModel held(config);
  auto directory = std::make_unique<WeightShare>(share_options("directory"));
  directory->offer(config, held);
  // A holder that was announced and then went away.
  auto gone = std::make_unique<WeightShare>(share_options("gone"));
  const std::string gone_address = "127.0.0.1:" + std::to_string(gone->port());
  gone.reset();
  EndpointOptions quick = endpoint_options("fetcher");
  quick.timeout = 2s;
  auto fetcher = std::make_shared<WeightFetcher>("127.0.0.1", directory->port(), quick);
  fetcher->announce(gone_address, config, held);

  std::vector<std::string> log;
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(same_bytes(*logged_loader(fetcher, log)(config, {}), held));
  }
  EXPECT_THAT(joined(log), HasSubstr(gone_address + ": "));
  EXPECT_EQ(directory->fetches_served(), 2u);

  // No directory at all: the model's own weights, within the timeout.
  directory.reset();
  log.clear();
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(same_bytes(*logged_loader(fetcher, log)(config, {}), held));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3 * quick.timeout);
  EXPECT_THAT(joined(log), HasSubstr("weights loaded here"));
}

TEST(WeightShare, HostileRequestsAreAnsweredAndTheShareServesOn) {
  const ModelConfig config = mlp_config(4);
  ServedModel held(config);
  WeightShare share(share_options("holder"));
  share.offer(config, held);
  transport::Endpoint client(endpoint_options("hostile"));
  const transport::PeerId peer = client.connect("127.0.0.1", share.port());
  const auto ask = [&](const Tensor& request) {
    auto reply = client.recv(peer, 2);
    client.send(request, peer, 1).wait();
    const Tensor t = reply.get();
    std::string json(static_cast<const char*>(t.data_ptr()), static_cast<size_t>(t.numel()));
    for (size_t at; (at = json.find("\\\"")) != std::string::npos;) json.erase(at, 1);
    return json;
  };
  const auto text = [](const std::string& s) {
    Tensor t = empty({static_cast<int64_t>(s.size())}, TensorOptions().dtype(kUInt8));
    std::memcpy(t.data_ptr(), s.data(), s.size());
    return t;
  };
  EXPECT_THAT(ask(text("not json")), HasSubstr("text that is not JSON"));
  EXPECT_THAT(ask(text("[1, 2]")), HasSubstr("holding a JSON object, got array"));
  EXPECT_THAT(ask(ones({4})), HasSubstr("1-d uint8 tensor, got Float32 [4]"));
  EXPECT_THAT(ask(text(std::string(100, '[') + std::string(100, ']'))),
              HasSubstr("nested at most 16 brackets, got 100"));
  EXPECT_THAT(ask(text(R"({"op": "format"})")), HasSubstr("expected op \"list\""));
  EXPECT_THAT(ask(text(R"({"op": 7})")), HasSubstr("expected field \"op\""));
  EXPECT_THAT(ask(text(R"({"op": "fetch", "model": "tiny"})")),
              HasSubstr("expected field \"arch\""));
  EXPECT_THAT(ask(text(R"({"op": "fetch", "model": "tiny", "arch": "mlp", "weights_id": "seed:4",)"
                       R"( "nbytes": -1, "fingerprint": 0})")),
              HasSubstr("expected field \"nbytes\" (an unsigned integer), got -1"));
  EXPECT_THAT(ask(text(R"({"op": "announce", "model": "x", "arch": "mlp", "weights_id": "s",)"
                       R"( "nbytes": 1, "fingerprint": 1, "content_hash": 1, "address": "a:b"})")),
              HasSubstr("expected an address host:port"));
  EXPECT_EQ(share.fetches_served(), 0u);

  // A request above the limit is refused by the transport before anything is allocated; the
  // connection ends, the share goes on.
  auto refused = client.recv(peer, 2);
  client.send(zeros({static_cast<int64_t>(kMaxRequestBytes) + 1}, TensorOptions().dtype(kUInt8)),
              peer, 1);
  EXPECT_THROW(refused.get(), transport::TransportError);

  auto fetcher =
      std::make_shared<WeightFetcher>("127.0.0.1", share.port(), endpoint_options("after"));
  std::vector<std::string> log;
  EXPECT_TRUE(same_bytes(*logged_loader(fetcher, log)(config, {}), held));
  EXPECT_EQ(share.fetches_served(), 1u);
}

TEST(WeightShare, ServesClientsAtOnceAndRefusesBeyondTheLimit) {
  const ModelConfig config = mlp_config(8, {256, 256});
  ServedModel held(config);
  WeightShareOptions options = share_options("holder");
  options.max_clients = 3;
  WeightShare share(options);
  share.offer(config, held);
  std::vector<std::shared_ptr<WeightFetcher>> fetchers;
  for (int i = 0; i < 3; ++i) {
    fetchers.push_back(std::make_shared<WeightFetcher>("127.0.0.1", share.port(),
                                                       endpoint_options("f" + std::to_string(i))));
  }
  std::vector<std::thread> threads;
  std::atomic<int> same{0};
  for (auto& f : fetchers) {
    threads.emplace_back([&, f] {
      std::vector<std::string> log;
      for (int k = 0; k < 3; ++k) same += same_bytes(*logged_loader(f, log)(config, {}), held);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(same.load(), 9);
  EXPECT_EQ(share.fetches_served(), 9u);
  // A fourth client is let in (authenticated) and then closed. The close can reach it while its
  // connect is still finishing (a loaded machine: then the constructor raises, as
  // Endpoint::connect does, naming the address) or after (then its fetch fails and its model
  // loads here). Either way the share serves it nothing.
  EndpointOptions quick = endpoint_options("fourth");
  quick.timeout = 2s;
  std::shared_ptr<WeightFetcher> fourth;
  try {
    fourth = std::make_shared<WeightFetcher>("127.0.0.1", share.port(), quick);
  } catch (const transport::TransportError& e) {
    EXPECT_THAT(e.what(), HasSubstr("127.0.0.1:" + std::to_string(share.port())));
  }
  if (fourth) {
    std::vector<std::string> log;
    EXPECT_TRUE(same_bytes(*logged_loader(fourth, log)(config, {}), held));
    EXPECT_THAT(joined(log), HasSubstr("weights loaded here"));
  }
  EXPECT_EQ(share.fetches_served(), 9u);
}

}  // namespace
}  // namespace ferry::switch_
