// Endpoint within one process: two endpoints (two UCX workers) over loopback TCP or shared
// memory, as two processes would use them; the multi-process tests are in multiprocess_test.cc.
// Checks values against the sent tensors for random dtypes, shapes and layouts, sim devices under
// chaos, authentication, validation, timeouts and a peer that goes away.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "ferry/ferry.h"
#include "ferry/memory/pinned_allocator.h"
#include "ferry/transport/endpoint.h"
#include "tests/support/errors.h"
#include "tests/support/random.h"
#include "tests/support/tensor_compare.h"

namespace ferry::transport {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

EndpointOptions options_named(const std::string& name, std::chrono::milliseconds timeout = 10s) {
  EndpointOptions o;
  o.name = name;
  o.secret = "test-secret";
  o.timeout = timeout;
  return o;
}

// A port nothing listens on now, as the kernel picks one for a bind to port 0 (released at once;
// the kernel does not hand it out again soon, unlike a port computed here).
uint16_t free_tcp_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), length), 0);
  EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
  close(fd);
  return ntohs(address.sin_port);
}

// A connected pair: `server` listened and accepted `client`.
struct Pair {
  std::unique_ptr<Endpoint> server, client;
  PeerId server_to_client = 0, client_to_server = 0;
};

Pair connect_pair(EndpointOptions server_options = options_named("server"),
                  EndpointOptions client_options = options_named("client")) {
  Pair p;
  p.server = std::make_unique<Endpoint>(server_options);
  p.client = std::make_unique<Endpoint>(client_options);
  const uint16_t port = p.server->listen();
  std::thread connector([&] { p.client_to_server = p.client->connect("127.0.0.1", port); });
  p.server_to_client = p.server->accept();
  connector.join();
  return p;
}

// Same dtype, sizes and values, bit for bit (NaN equal to NaN).
void expect_same(const Tensor& got, const Tensor& sent) {
  EXPECT_EQ(got.scalar_type(), sent.scalar_type());
  EXPECT_ALL_CLOSE(got.to(kCPU), sent.to(kCPU), 0.0, 0.0);
}

TEST(TransportEndpoint, SendsAndReceivesTensorsOfEveryKindWithTheirLayout) {
  SCOPED_TRACE(ferry::testing::seed_trace());
  Pair p = connect_pair();
  EXPECT_THAT(p.server->peer_name(p.server_to_client), HasSubstr("client (127.0.0.1:"));
  EXPECT_THAT(p.client->peer_name(p.client_to_server), HasSubstr("server (127.0.0.1:"));
  Generator gen(ferry::testing::test_seed());
  std::vector<Tensor> sent = {
      randn({3, 4}, kFloat32, &gen),                           // contiguous, inline
      randn({64, 80}, kFloat32, &gen).t(),                     // a dense transpose: its layout kept
      randn({300, 200}, kFloat64, &gen).slice(1, 10, 150, 3),  // strided: packed
      randn({1 << 20}, kBFloat16, &gen),                       // 2 MiB: a second message
      arange(17, kInt64),
      zeros({0, 5}, kFloat32),
      ones({2, 3}, kBool),
  };
  std::vector<Future<void>> sends;
  for (size_t i = 0; i < sent.size(); ++i)
    sends.push_back(p.client->send(sent[i], p.client_to_server, 7));
  for (size_t i = 0; i < sent.size(); ++i) {
    SCOPED_TRACE("tensor " + std::to_string(i));
    const Tensor got = p.server->recv(p.server_to_client, 7).get();
    expect_same(got, sent[i]);
    if (sent[i].is_non_overlapping_and_dense())
      EXPECT_EQ(got.strides(), sent[i].strides());
    else
      EXPECT_TRUE(got.is_contiguous());
  }
  for (auto& s : sends) s.wait();
}

// Sets UCX_TLS while alive (read when an endpoint is made), then restores it.
class ScopedTls {
 public:
  explicit ScopedTls(const char* tls) {
    if (const char* old = std::getenv("UCX_TLS")) old_ = old;
    ::setenv("UCX_TLS", tls, 1);
  }
  ~ScopedTls() {
    if (old_) {
      ::setenv("UCX_TLS", old_->c_str(), 1);
    } else {
      ::unsetenv("UCX_TLS");
    }
  }

 private:
  std::optional<std::string> old_;
};

// Tensors whose innermost dimensions are contiguous go as lists of rows (no pack) when the rows
// are long enough and the data goes over shared memory; over TCP they are packed. Every layout
// arrives bit for bit and contiguous, and the counts say how each one went.
TEST(TransportEndpoint, StridedTensorsWithLongRowsGoAsRowsOverSharedMemory) {
  SCOPED_TRACE(ferry::testing::seed_trace());
  Generator gen(ferry::testing::test_seed());
  struct Case {
    Tensor tensor;
    bool as_rows;
  };
  const std::vector<Case> cases = {
      {randn({64, 1024}, kFloat32, &gen).narrow(1, 0, 512), true},    // rows of 2 KiB
      {randn({8, 6, 300}, kFloat64, &gen).narrow(0, 1, 5), false},    // dense: own memory
      {randn({4, 6, 4, 256}, kFloat32, &gen).narrow(1, 2, 3), true},  // 3 dims: 12 KiB rows
      {randn({6, 5, 4, 512}, kBFloat16, &gen).select(1, 2), true},    // 4 KiB rows
      {randn({2000, 300}, kFloat32, &gen).narrow(1, 0, 200), false},  // 800 B rows: packed
      {randn({5000, 600}, kFloat32, &gen).mul(1000).to(kInt16).narrow(1, 0, 520),
       false},                                                              // 5000 rows: packed
      {randn({16, 2048}, kFloat32, &gen).slice(0, 0, 16, 3), true},         // every third row
      {randn({3, 4000}, kFloat32, &gen).narrow(1, 1, 3000).t().t(), true},  // offset rows
  };
  for (const char* tls : {"sm,tcp", "tcp"}) {
    SCOPED_TRACE(std::string("UCX_TLS=") + tls);
    const bool shared_memory = std::string(tls) == "sm,tcp";
    ScopedTls scoped(tls);
    EndpointOptions rows = options_named("client");
    rows.row_send_min_bytes = 1024;
    Pair p = connect_pair(options_named("server"), rows);
    std::vector<Future<void>> sends;
    for (const Case& c : cases) sends.push_back(p.client->send(c.tensor, p.client_to_server, 9));
    uint64_t expected_rows = 0;
    for (size_t i = 0; i < cases.size(); ++i) {
      SCOPED_TRACE("case " + std::to_string(i));
      const Tensor got = p.server->recv(p.server_to_client, 9).get();
      expect_same(got, cases[i].tensor);
      if (!cases[i].tensor.is_non_overlapping_and_dense()) {
        EXPECT_TRUE(got.is_contiguous());
      }
      expected_rows += cases[i].as_rows && shared_memory;
    }
    for (auto& s : sends) s.wait();
    const SendStats stats = p.client->send_stats();
    EXPECT_EQ(stats.as_rows, expected_rows);
    EXPECT_EQ(stats.own_memory, 1u);
    EXPECT_EQ(stats.packed, cases.size() - expected_rows - 1);
    // The server's default minimum is 4 KiB: 2 KiB rows are packed.
    auto back = p.client->recv(p.client_to_server, 10);
    p.server->send(cases[0].tensor, p.server_to_client, 10).wait();
    expect_same(back.get(), cases[0].tensor);
    EXPECT_EQ(p.server->send_stats().packed, 1u);
    EXPECT_EQ(p.server->send_stats().as_rows, 0u);
  }
}

void configure_chaos() {
  sim::SimConfig c = sim::config();
  c.chaos_seed = ferry::testing::test_seed();
  c.chaos_max_delay = std::chrono::microseconds(300);
  sim::configure(c);
}

struct ChaosScope {
  ChaosScope() { configure_chaos(); }
  ~ChaosScope() { sim::reset_config(); }
};

// A device tensor is sent after the work queued on its stream, and a received one is written on
// the stream that was current at the recv call: with chaos delaying every queued operation, a
// missing wait on either side reads or returns stale bytes.
TEST(TransportEndpoint, DeviceTensorsFollowTheirStreams) {
  SCOPED_TRACE(ferry::testing::seed_trace());
  ChaosScope chaos;
  Pair p = connect_pair();
  Generator gen(ferry::testing::test_seed());
  const Device sim0("sim:0"), sim1("sim:1");
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const int64_t n = round % 2 == 0 ? 100 : 300000;  // inline and as a second message
    const Tensor host = randn({n}, kFloat32, &gen);
    // Produced on sim:0's current stream: the send must wait for the multiply.
    Tensor on_device = host.to(sim0, /*non_blocking=*/false);
    on_device.mul_(3.0);
    auto sent = p.client->send(on_device, p.client_to_server, 1);
    // Received on a side stream of sim:1, then read on that stream.
    const Stream side = get_stream_from_pool(sim1);
    Tensor got;
    {
      StreamGuard guard(side);
      got = p.server->recv(p.server_to_client, 1, TensorOptions(sim1)).get();
      EXPECT_EQ(got.device(), sim1);
      got = got.add(1.0);  // queued on `side`, after the copy
    }
    side.synchronize();
    sent.wait();
    EXPECT_ALL_CLOSE(got.to(kCPU), host.mul(3.0).add(1.0), 0.0, 0.0);
    // Into an existing device tensor, with a transposed layout on the wire.
    const Tensor matrix = randn({40, 70}, kFloat32, &gen).to(sim0).t();
    Tensor into = empty({70, 40}, TensorOptions(sim1));
    auto sent2 = p.client->send(matrix, p.client_to_server, 2);
    p.server->recv(into, p.server_to_client, 2).wait();
    sent2.wait();
    EXPECT_ALL_CLOSE(into.to(kCPU), matrix.to(kCPU), 0.0, 0.0);
  }
}

// A destination in any non-overlapping layout: a column band of a larger tensor, a transposed
// band on a device; the elements around it stay as they were. An overlapping one is refused.
TEST(TransportEndpoint, ReceivesIntoStridedViewsAndRefusesOverlappingOnes) {
  SCOPED_TRACE(ferry::testing::seed_trace());
  Pair p = connect_pair();
  Generator gen(ferry::testing::test_seed());
  for (const Device device : {Device("cpu"), Device("sim:0")}) {
    SCOPED_TRACE(device.str());
    for (const int64_t rows : {4, 40000}) {  // inline, and a payload of its own
      const Tensor sent = randn({rows, 5}, kFloat32, &gen);
      const Tensor big = full({rows, 10}, Scalar(-7.0), TensorOptions(kFloat32).device(device));
      auto done = p.client->send(sent, p.client_to_server, 5);
      Tensor band = big.narrow(1, 3, 5);
      EXPECT_FALSE(band.is_non_overlapping_and_dense());
      p.server->recv(band, p.server_to_client, 5).wait();
      done.wait();
      const Tensor host = big.to(kCPU);
      EXPECT_ALL_CLOSE(host.narrow(1, 3, 5), sent, 0.0, 0.0);
      EXPECT_ALL_CLOSE(host.narrow(1, 0, 3), full({rows, 3}, Scalar(-7.0), kFloat32), 0.0, 0.0);
      EXPECT_ALL_CLOSE(host.narrow(1, 8, 2), full({rows, 2}, Scalar(-7.0), kFloat32), 0.0, 0.0);
      // Transposed and strided: [5, rows] from columns 3..7 of big, read back as a transpose.
      auto again = p.client->send(sent.t(), p.client_to_server, 6);
      Tensor across = big.narrow(1, 3, 5).t();
      p.server->recv(across, p.server_to_client, 6).wait();
      again.wait();
      EXPECT_ALL_CLOSE(big.to(kCPU).narrow(1, 3, 5), sent, 0.0, 0.0);
    }
  }
  Tensor overlapping = zeros({3}, kFloat32).unsqueeze(0).expand({4, 3});
  EXPECT_THAT(ferry::testing::error_of<TransportError>(
                  [&] { p.server->recv(overlapping, p.server_to_client, 5); }),
              AllOf(HasSubstr("expected a destination whose elements do not overlap"),
                    HasSubstr("strides [0, 1]")));
}

TEST(TransportEndpoint, ReceivesConvertToTheAskedDtypeAndLandInPinnedMemory) {
  Pair p = connect_pair();
  const Tensor sent = arange(1000, kFloat32);
  p.client->send(sent, p.client_to_server, 3).wait();
  p.client->send(sent, p.client_to_server, 3).wait();
  const Tensor as_double = p.server->recv(p.server_to_client, 3, kFloat64).get();
  EXPECT_EQ(as_double.scalar_type(), kFloat64);
  EXPECT_ALL_CLOSE(as_double, sent.to(kFloat64), 0.0, 0.0);
  const Tensor pinned =
      p.server->recv(p.server_to_client, 3, TensorOptions(kFloat32).pinned_memory(true)).get();
  EXPECT_TRUE(pinned.is_pinned());
  EXPECT_ALL_CLOSE(pinned, sent, 0.0, 0.0);
}

// Pinned payloads go with a registration of their whole block, made once and reused, and dropped
// when the block goes back to the backend; other memory is left to UCX.
TEST(TransportEndpoint, PinnedBlocksAreRegisteredOnceAndReleasedWithTheirBlock) {
  Pair p = connect_pair();
  memory::pinned_empty_cache();
  const int64_t n = int64_t{1} << 18;  // 1 MiB: above the inline size, a message of its own
  Tensor sent = randn({n}).pin_memory();
  for (int i = 0; i < 4; ++i) {
    Tensor into = empty({n}, TensorOptions().pinned_memory(true));
    auto received = p.server->recv(into, p.server_to_client, 1);
    auto inner = p.server->recv(p.server_to_client, 2);
    p.client->send(sent.narrow(0, 1, n - 1), p.client_to_server, 2).wait();  // inside the block
    p.client->send(sent, p.client_to_server, 1).wait();
    received.wait();
    expect_same(into, sent);
    expect_same(inner.get(), sent.narrow(0, 1, n - 1));
  }
  const RegistrationStats client = p.client->registration_stats();
  ASSERT_EQ(client.failed, 0u) << "UCX would not register pinned host memory";
  EXPECT_EQ(client.registered, 1u);
  EXPECT_EQ(client.reused, 7u);
  EXPECT_EQ(client.live, 1u);
  // Each receive landed in a block from the pinned cache: the same one again once freed.
  const RegistrationStats server = p.server->registration_stats();
  EXPECT_EQ(server.registered + server.reused, 4u);
  EXPECT_LE(server.registered, 2u);

  // Plain memory is not registered by ferry.
  auto plain = p.server->recv(p.server_to_client, 3);
  p.client->send(randn({n}), p.client_to_server, 3).wait();
  plain.get();
  EXPECT_EQ(p.client->registration_stats().registered, 1u);
  EXPECT_EQ(p.client->registration_stats().reused, 7u);

  // The block goes back to the backend: its registration goes first, and a new block is
  // registered afresh.
  sent = Tensor();
  memory::pinned_empty_cache();
  EXPECT_EQ(p.client->registration_stats().released, 1u);
  EXPECT_EQ(p.client->registration_stats().live, 0u);
  EXPECT_EQ(p.server->registration_stats().live, 0u);
  const Tensor again = arange(n, kFloat32).pin_memory();
  auto fresh = p.server->recv(p.server_to_client, 4);
  p.client->send(again, p.client_to_server, 4).wait();
  expect_same(fresh.get(), again);
  EXPECT_EQ(p.client->registration_stats().registered, 2u);

  // A device tensor is staged through pinned blocks, registered once and reused.
  const Device sim("sim:0");
  const Tensor on_device = randn({n}).to(sim);
  const uint64_t before = p.client->registration_stats().registered;
  for (int i = 0; i < 3; ++i) {
    auto staged = p.server->recv(p.server_to_client, 5);
    p.client->send(on_device, p.client_to_server, 5).wait();
    expect_same(staged.get(), on_device);
  }
  EXPECT_LE(p.client->registration_stats().registered - before, 1u);
}

// Per tag, tensors arrive in the order they were sent, whatever their sizes and whatever the
// other tags do in between.
TEST(TransportEndpoint, OrderIsKeptPerTagAcrossInterleavedTagsAndSizes) {
  SCOPED_TRACE(ferry::testing::seed_trace());
  Pair p = connect_pair();
  auto rng = ferry::testing::test_rng();
  std::vector<Future<void>> sends;
  std::vector<std::vector<int64_t>> sent_per_tag(3);
  for (int i = 0; i < 60; ++i) {
    const uint64_t tag = rng() % 3;
    const int64_t n = (rng() % 2 == 0) ? int64_t(rng() % 100) : int64_t(3000 + rng() % 200000);
    sends.push_back(p.client->send(full({n}, Scalar(int64_t{i}), kInt64), p.client_to_server, tag));
    sent_per_tag[tag].push_back(i);
  }
  for (uint64_t tag = 0; tag < 3; ++tag) {
    for (int64_t expected : sent_per_tag[tag]) {
      const Tensor got = p.server->recv(p.server_to_client, tag).get();
      EXPECT_ALL_CLOSE(got, full({got.numel()}, Scalar(expected), kInt64), 0.0, 0.0)
          << "tag " << tag;
    }
  }
  for (auto& s : sends) s.wait();
}

// The small-tensor path: a dense CPU tensor of at most 64 bytes goes in one UCX call and its
// future is ready on return (when the header and payload fit UCX's inline protocol, 93 bytes on
// shared memory, and UCX has wired the connection up: a few tensors have crossed),
// unless a staged device send to the same peer is still queued ahead of it; then it waits its
// turn, and the receiver sees every tensor in send order.
TEST(TransportEndpoint, SmallSendsGoAtOnceButNeverOvertakeAStagedSend) {
  SCOPED_TRACE(ferry::testing::seed_trace());
  Generator gen(ferry::testing::test_seed());
  for (const char* tls : {"sm,tcp", "tcp"}) {
    SCOPED_TRACE(std::string("UCX_TLS=") + tls);
    ScopedTls scoped(tls);
    ChaosScope chaos;
    Pair p = connect_pair();
    for (int i = 0; i < 3; ++i) {  // wire-up
      p.client->send(arange(1000, kFloat32), p.client_to_server, 6).wait();
      p.server->recv(p.server_to_client, 6).wait();
    }
    EXPECT_EQ(p.client->send_stats().at_once, 0u);
    const Tensor small = randn({2}, kFloat32, &gen);  // 8 bytes: 56 with its header
    auto first = p.client->send(small, p.client_to_server, 7);
    EXPECT_TRUE(first.ready());
    EXPECT_EQ(p.client->send_stats().at_once, 1u);
    const Tensor got_first = p.server->recv(p.server_to_client, 7).get();
    EXPECT_EQ(got_first.sizes(), small.sizes());
    expect_same(got_first, small);
    // 65 bytes, and a strided 32: the ordinary path.
    p.client->send(full({65}, Scalar(int64_t{3}), kInt8), p.client_to_server, 8).wait();
    p.client->send(randn({4, 8}, kFloat32, &gen).narrow(1, 0, 2), p.client_to_server, 8).wait();
    EXPECT_EQ(p.client->send_stats().at_once, 1u);
    p.server->recv(p.server_to_client, 8).wait();
    p.server->recv(p.server_to_client, 8).wait();
    for (int round = 0; round < 5; ++round) {
      SCOPED_TRACE("round " + std::to_string(round));
      // Produced by a chain of kernels on sim:0's stream: its staged copy may still be pending
      // when the small sends below are made.
      Tensor big = randn({200000}, kFloat32, &gen).to(Device("sim:0"));
      for (int i = 0; i < 4; ++i) big = big.mul(1.5).add(0.25);
      std::vector<Tensor> sent = {big};
      std::vector<Future<void>> sends = {p.client->send(big, p.client_to_server, 9)};
      for (int i = 0; i < 3; ++i) {
        sent.push_back(full({2}, Scalar(double(round * 10 + i)), kFloat64));
        sends.push_back(p.client->send(sent.back(), p.client_to_server, 9));
      }
      for (const Tensor& expected : sent) {
        const Tensor got = p.server->recv(p.server_to_client, 9).get();
        ASSERT_EQ(got.sizes(), expected.sizes());
        expect_same(got, expected);
      }
      for (auto& s : sends) s.wait();
    }
    // The small path checks what the ordinary one does.
    EXPECT_THROW(p.client->send(small, p.client_to_server, kMaxUserTag + 1), TransportError);
    EXPECT_THROW(p.client->send(small, 12345, 1), TransportError);
  }
}

// The small-receive path: a receive into a dense CPU tensor of at most inline_bytes compares the
// message with the header that tensor expects instead of decoding it. It completes inside UCX's
// callback when posted before the message arrives, and when posted after, as it is posted. A
// header that differs (other strides, another dtype, a larger tensor) takes the general path,
// which still lands what it can and refuses what it must.
TEST(TransportEndpoint, SmallReceivesTakeTheHeaderTheyExpectAndFallBackOtherwise) {
  SCOPED_TRACE(ferry::testing::seed_trace());
  Generator gen(ferry::testing::test_seed());
  for (const char* tls : {"sm,tcp", "tcp"}) {
    SCOPED_TRACE(std::string("UCX_TLS=") + tls);
    ScopedTls scoped(tls);
    Pair p = connect_pair();
    Endpoint& tx = *p.client;
    Endpoint& rx = *p.server;
    const PeerId to = p.client_to_server, from = p.server_to_client;
    // Posted first, then sent: a window of four, completed in UCX's callbacks, in order.
    std::vector<Tensor> into, sent;
    std::vector<Future<Tensor>> recvs;
    for (int i = 0; i < 4; ++i) {
      into.push_back(empty({3, 2}, TensorOptions(kFloat32)));
      recvs.push_back(rx.recv(into.back(), from, 11));
    }
    for (int i = 0; i < 4; ++i) {
      sent.push_back(randn({3, 2}, kFloat32, &gen));
      tx.send(sent.back(), to, 11).wait();
    }
    for (int i = 0; i < 4; ++i) {
      const Tensor got = recvs[static_cast<size_t>(i)].get();
      EXPECT_TRUE(got.is_same(into[static_cast<size_t>(i)]));
      expect_same(got, sent[static_cast<size_t>(i)]);
    }
    EXPECT_EQ(rx.recv_stats().expected_header, 4u);
    EXPECT_EQ(rx.recv_stats().in_callback, 4u);
    // Sent first: the message waits in UCX until the receive is posted. A later tensor under
    // another tag, received first, shows it has arrived (one connection delivers in order).
    const Tensor early = randint(-1000, 1000, {5}, TensorOptions(kInt64), &gen);  // 40 bytes
    tx.send(early, to, 12).wait();
    tx.send(zeros({1}, kInt8), to, 13).wait();
    rx.recv(from, 13).wait();
    const Tensor early_into = full({5}, Scalar(int64_t{-1}), kInt64);
    expect_same(rx.recv(early_into, from, 12).get(), early);
    EXPECT_EQ(rx.recv_stats().expected_header, 5u);
    EXPECT_EQ(rx.recv_stats().in_callback, 4u);
    // A size-1 dimension's stride does not matter: contiguous all the same, the expected header.
    const Tensor odd_strides = randn({2, 1}, kFloat32, &gen).t();  // sizes {1, 2}, strides {1, 1}
    ASSERT_EQ(odd_strides.stride(0), 1);
    auto odd = rx.recv(empty({1, 2}, TensorOptions(kFloat32)), from, 14);
    tx.send(odd_strides, to, 14).wait();
    expect_same(odd.get(), odd_strides);
    EXPECT_EQ(rx.recv_stats().expected_header, 6u);
    // A dense tensor in another layout (a transpose) into a contiguous one: the general path,
    // which lands it in the sent layout and copies it over.
    const Tensor transposed = randn({2, 3}, kFloat32, &gen).t();  // sizes {3, 2}, strides {1, 3}
    auto other_layout = rx.recv(empty({3, 2}, TensorOptions(kFloat32)), from, 14);
    tx.send(transposed, to, 14).wait();
    expect_same(other_layout.get(), transposed);
    // Another dtype: refused, naming both.
    auto wrong = rx.recv(empty({3, 2}, TensorOptions(kFloat32)), from, 15);
    tx.send(randn({3, 2}, kFloat64, &gen), to, 15).wait();
    EXPECT_THAT(ferry::testing::error_of<TransportError>([&] { wrong.get(); }),
                AllOf(HasSubstr("expected float32"), HasSubstr("got float64")));
    // Larger than inline_bytes: a header then a payload message, as ever.
    const Tensor big = randn({4096}, kFloat32, &gen);
    auto big_recv = rx.recv(empty({4096}, TensorOptions(kFloat32)), from, 16);
    tx.send(big, to, 16).wait();
    expect_same(big_recv.get(), big);
    EXPECT_EQ(rx.recv_stats().expected_header, 6u);
    EXPECT_EQ(rx.recv_stats().in_callback, 5u);
  }
}

TEST(TransportEndpoint, AWrongSecretIsRefusedAndNothingIsAccepted) {
  EndpointOptions server_options = options_named("server", 2s);
  EndpointOptions client_options = options_named("client", 2s);
  client_options.secret = "not-the-secret";
  Endpoint server(server_options), client(client_options);
  const uint16_t port = server.listen();
  std::string accept_error;
  std::thread acceptor(
      [&] { accept_error = ferry::testing::error_of<TransportError>([&] { server.accept(); }); });
  const std::string connect_error =
      ferry::testing::error_of<TransportError>([&] { client.connect("127.0.0.1", port); });
  acceptor.join();
  EXPECT_THAT(connect_error, HasSubstr("connecting to 127.0.0.1:"));
  EXPECT_THAT(connect_error, HasSubstr("secret"));
  EXPECT_THAT(accept_error, HasSubstr("no peer connected and authenticated within 2000 ms"));
}

// Ranks start in any order: a connect made before the server listens keeps trying until it does
// (within the timeout).
TEST(TransportEndpoint, AConnectWaitsForAListenerThatComesLater) {
  Endpoint server(options_named("server")), client(options_named("client"));
  const uint16_t port = free_tcp_port();
  PeerId to_server = 0;
  std::string error;
  std::thread connector([&] {
    error = ferry::testing::error_of<TransportError>(
        [&] { to_server = client.connect("127.0.0.1", port); });
  });
  std::this_thread::sleep_for(300ms);
  server.listen("127.0.0.1", port);
  const PeerId to_client = server.accept();
  connector.join();
  EXPECT_EQ(error, "(no exception of the expected type)");
  client.send(full({3}, Scalar(4.0), kFloat32), to_server, 1).wait();
  EXPECT_ALL_CLOSE(server.recv(to_client, 1).get(), full({3}, Scalar(4.0), kFloat32));
}

TEST(TransportEndpoint, AnEndpointNeedsASecret) {
  const char* saved = std::getenv("FERRY_TRANSPORT_SECRET");
  const std::string saved_value = saved ? saved : "";
  unsetenv("FERRY_TRANSPORT_SECRET");
  EXPECT_THAT(ferry::testing::error_of<TransportError>([] { Endpoint e{EndpointOptions{}}; }),
              HasSubstr("FERRY_TRANSPORT_SECRET"));
  if (saved) setenv("FERRY_TRANSPORT_SECRET", saved_value.c_str(), 1);
}

// A header announcing more than max_message_bytes fails the receive before anything is
// allocated; the connection goes on working for the next tensor.
TEST(TransportEndpoint, OversizedAndMismatchedTensorsAreRefusedNamingBoth) {
  EndpointOptions server_options = options_named("server", 5s);
  server_options.max_message_bytes = 1 << 20;
  Pair p = connect_pair(server_options);
  auto big = p.client->send(zeros({1 << 19}, kFloat32), p.client_to_server, 4);  // 2 MiB
  EXPECT_THAT(ferry::testing::error_of<TransportError>(
                  [&] { p.server->recv(p.server_to_client, 4).get(); }),
              HasSubstr("expected a payload of at most 1048576 bytes (EndpointOptions::"
                        "max_message_bytes), got 2097152"));
  auto small = p.client->send(ones({5}, kInt32), p.client_to_server, 4);
  Tensor wrong_shape = empty({6}, kInt32);
  EXPECT_THAT(ferry::testing::error_of<TransportError>(
                  [&] { p.server->recv(wrong_shape, p.server_to_client, 4).get(); }),
              AllOf(HasSubstr("expected sizes [6]"), HasSubstr("got [5]")));
  p.client->send(ones({5}, kInt32), p.client_to_server, 4);
  Tensor wrong_dtype = empty({5}, kInt64);
  EXPECT_THAT(ferry::testing::error_of<TransportError>(
                  [&] { p.server->recv(wrong_dtype, p.server_to_client, 4).get(); }),
              AllOf(HasSubstr("expected int64"), HasSubstr("got int32")));
  p.client->send(full({3}, Scalar(7.0), kFloat32), p.client_to_server, 4);
  EXPECT_ALL_CLOSE(p.server->recv(p.server_to_client, 4).get(), full({3}, Scalar(7.0), kFloat32));
  small.wait();
  EXPECT_THAT(ferry::testing::error_of<TransportError>(
                  [&] { p.client->send(ones({1}), p.client_to_server, uint64_t{1} << 36); }),
              HasSubstr("expected a tag below 2^36"));
  EXPECT_THAT(ferry::testing::error_of<TransportError>([&] { p.client->send(ones({1}), 999, 0); }),
              HasSubstr("expected a connected peer id, got 999"));
}

TEST(TransportEndpoint, AWaitEndsAtItsTimeoutAndTheReceiveIsCancelled) {
  Pair p = connect_pair();
  auto pending = p.server->recv(p.server_to_client, 9);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THAT(ferry::testing::error_of<TransportError>([&] { pending.wait(100ms); }),
              HasSubstr("timed out after 100 ms receiving from client (127.0.0.1:"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  // The cancelled receive does not take the next tensor: a new one does.
  p.client->send(full({2}, Scalar(5), kInt64), p.client_to_server, 9).wait();
  EXPECT_ALL_CLOSE(p.server->recv(p.server_to_client, 9).get(), full({2}, Scalar(5), kInt64));
}

TEST(TransportEndpoint, APeerThatGoesAwayFailsPendingOperationsNamingIt) {
  Pair p = connect_pair(options_named("server"), options_named("client", 20s));
  auto pending = p.client->recv(p.client_to_server, 1);
  const auto start = std::chrono::steady_clock::now();
  p.server.reset();  // closes its connections
  const std::string error = ferry::testing::error_of<TransportError>([&] { pending.wait(); });
  EXPECT_THAT(error, HasSubstr("peer server (127.0.0.1:"));
  EXPECT_THAT(error, HasSubstr("is gone"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 15s);
  EXPECT_THAT(ferry::testing::error_of<TransportError>(
                  [&] { p.client->send(ones({1}), p.client_to_server, 0); }),
              HasSubstr("is not connected"));
}

// A send the peer never received (8 MiB: a rendezvous, which completes only when the receiver
// takes it) fails like a receive when the peer goes away, naming it, within the bound.
TEST(TransportEndpoint, APeerThatGoesAwayFailsAPendingSendNamingIt) {
  Pair p = connect_pair(options_named("server"), options_named("client", 20s));
  auto pending = p.client->send(zeros({int64_t{1} << 21}, kFloat32), p.client_to_server, 3);
  EXPECT_FALSE(pending.ready());
  const auto start = std::chrono::steady_clock::now();
  p.server.reset();
  const std::string error = ferry::testing::error_of<TransportError>([&] { pending.wait(); });
  EXPECT_THAT(error, HasSubstr("peer server (127.0.0.1:"));
  EXPECT_THAT(error, HasSubstr("is gone"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 15s);
}

}  // namespace
}  // namespace ferry::transport
