// The serving front end over real sockets: permissions, SO_PEERCRED, timeouts against slow
// clients, hostile frames answered and the server still up, connection limits, clients that die
// mid-request, draining stop, handler errors mapped to codes, TCP on loopback, and a seeded live
// fuzz of thousands of hostile frames. Every wait is bounded.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <cstring>
#include <future>
#include <random>

#include "ferry/ferry.h"
#include "ferry/switch/client.h"
#include "ferry/switch/server.h"
#include "tests/support/errors.h"
#include "tests/support/random.h"
#include "tests/switch/switch_test_util.h"

namespace ferry::switch_ {
namespace {

using testing::closed_by_peer;
using testing::eventually;
using ::testing::HasSubstr;
using testing::read_answer;
using testing::same_tensor;
using testing::ScriptedHandler;
using testing::send_raw;
using testing::TempDir;
using namespace std::chrono_literals;

std::vector<NamedTensor> sample_inputs() {
  Tensor x = arange(12, TensorOptions(kFloat32)).reshape({3, 4});
  return {{"x", x}};
}

class SwitchServer : public ::testing::Test {
 protected:
  void start(ServerOptions options = {}) {
    options.socket_path = dir.file("ferry.sock");
    server = std::make_unique<Server>(options, handler);
  }
  UniqueFd raw() { return connect_unix(server->socket_path(), 5s); }
  void expect_alive() {
    Client client(server->socket_path());
    InferResult r = client.infer("echo", sample_inputs());
    ASSERT_EQ(r.outputs.size(), 1u);
    EXPECT_TRUE(same_tensor(r.outputs[0].tensor, sample_inputs()[0].tensor));
  }

  TempDir dir;
  std::shared_ptr<ScriptedHandler> handler = std::make_shared<ScriptedHandler>();
  std::unique_ptr<Server> server;
};

TEST_F(SwitchServer, EchoRoundTrip) {
  start();
  Client client(server->socket_path());
  for (int i = 0; i < 3; ++i) {
    InferResult r = client.infer("echo", sample_inputs(), 5s);
    ASSERT_EQ(r.outputs.size(), 1u);
    EXPECT_EQ(r.outputs[0].name, "x");
    EXPECT_TRUE(same_tensor(r.outputs[0].tensor, sample_inputs()[0].tensor));
    EXPECT_EQ(r.timings.compute_ms, 0.5);
  }
  EXPECT_EQ(server->accepted_connections(), 1u);
}

TEST_F(SwitchServer, DirectoryAndSocketPermissions) {
  const std::string sub = dir.file("made");
  ServerOptions options;
  options.socket_path = sub + "/s.sock";
  Server made(options, handler);
  struct stat st {};
  ASSERT_EQ(::stat(sub.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  ASSERT_EQ(::stat(options.socket_path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  // A second server at the same path is refused; the first goes on.
  EXPECT_THAT(::ferry::testing::error_of<SwitchError>([&] { Server again(options, handler); }),
              HasSubstr("already listening"));
  made.stop();
  EXPECT_NE(::access(options.socket_path.c_str(), F_OK), 0) << "stop removes the socket file";
  // An open directory is refused.
  const std::string open_dir = dir.file("open");
  ASSERT_EQ(::mkdir(open_dir.c_str(), 0755), 0);
  ASSERT_EQ(::chmod(open_dir.c_str(), 0755), 0);
  options.socket_path = open_dir + "/s.sock";
  EXPECT_THAT(::ferry::testing::error_of<SwitchError>([&] { Server refused(options, handler); }),
              HasSubstr("private"));
}

TEST_F(SwitchServer, StaleSocketFileIsReplaced) {
  {
    ServerOptions options;
    options.socket_path = dir.file("ferry.sock");
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strcpy(addr.sun_path, options.socket_path.c_str());
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ::close(fd);  // the file stays, nobody listens
  }
  start();
  expect_alive();
}

TEST_F(SwitchServer, PeerCredentialsOutsideTheAllowListAreRejected) {
  ServerOptions options;
  options.allowed_uids = {::geteuid() + 4242};
  start(options);
  UniqueFd fd = raw();
  send_raw(fd.get(), encode_infer_request(InferRequest{1, "echo", 0, sample_inputs()}));
  EXPECT_TRUE(closed_by_peer(fd.get()));
  EXPECT_TRUE(eventually([&] { return server->rejected_connections() == 1; }));
  EXPECT_EQ(handler->calls.load(), 0);
  EXPECT_EQ(server->accepted_connections(), 0u);
}

TEST_F(SwitchServer, SlowAndIdleClientsAreDropped) {
  ServerOptions options;
  options.read_timeout = 300ms;
  options.idle_timeout = 300ms;
  start(options);
  const auto frame = encode_infer_request(InferRequest{1, "echo", 0, sample_inputs()});
  {  // idle: connects and says nothing
    UniqueFd fd = raw();
    const auto t0 = Clock::now();
    EXPECT_TRUE(closed_by_peer(fd.get(), 5s));
    EXPECT_LT(Clock::now() - t0, 3s);
  }
  {  // slowloris: one byte every 50 ms keeps no thread past read_timeout
    UniqueFd fd = raw();
    const auto t0 = Clock::now();
    size_t sent = 0;
    while (sent < frame.size() && Clock::now() - t0 < 3s) {
      if (!write_full(fd.get(), std::span(frame).subspan(sent, 1), Clock::now() + 1s)) break;
      ++sent;
      std::this_thread::sleep_for(50ms);
    }
    EXPECT_LT(sent, frame.size());
    EXPECT_TRUE(closed_by_peer(fd.get(), 5s));
  }
  EXPECT_TRUE(eventually([&] { return server->active_connections() == 0; }));
  expect_alive();
}

TEST_F(SwitchServer, BadMagicAndVersionAreAnsweredThenClosed) {
  start();
  auto frame = encode_infer_request(InferRequest{5, "echo", 0, sample_inputs()});
  for (auto [at, value, code] : {std::tuple{0, 'Z', ErrorCode::bad_frame},
                                 std::tuple{4, '\x07', ErrorCode::unsupported_version},
                                 std::tuple{6, '\x02', ErrorCode::bad_frame}}) {
    auto bad = frame;
    bad[at] = static_cast<std::byte>(value);
    UniqueFd fd = raw();
    send_raw(fd.get(), bad);
    auto answer = read_answer(fd.get());
    ASSERT_EQ(answer.status, ReadStatus::ok);
    EXPECT_EQ(answer.frame.header.type, MessageType::error_response);
    EXPECT_EQ(answer.frame.error.code, code) << answer.frame.error.message;
    EXPECT_TRUE(closed_by_peer(fd.get()));
  }
  expect_alive();
}

TEST_F(SwitchServer, OversizedLengthIsRefusedBeforeThePayload) {
  ServerOptions options;
  options.limits.max_frame_bytes = 1 << 20;
  options.read_timeout = 30s;  // the answer must not wait for a payload that never comes
  start(options);
  FrameHeader header;
  header.payload_bytes = uint64_t{1} << 30;
  std::vector<std::byte> bytes(kHeaderBytes);
  encode_header(header, std::span<std::byte, kHeaderBytes>(bytes.data(), kHeaderBytes));
  UniqueFd fd = raw();
  send_raw(fd.get(), bytes);
  auto answer = read_answer(fd.get(), 5s);
  ASSERT_EQ(answer.status, ReadStatus::ok);
  EXPECT_EQ(answer.frame.error.code, ErrorCode::too_large);
  EXPECT_THAT(answer.frame.error.message, HasSubstr("at most 1048576"));
  EXPECT_TRUE(closed_by_peer(fd.get(), 5s));
  // A bad payload (wrong byte count) is answered too.
  auto frame = encode_infer_request(InferRequest{5, "echo", 0, sample_inputs()});
  frame[frame.size() - 48 - 8] = std::byte{1};  // the byte count's low byte
  UniqueFd fd2 = raw();
  send_raw(fd2.get(), frame);
  auto answer2 = read_answer(fd2.get(), 5s);
  ASSERT_EQ(answer2.status, ReadStatus::ok);
  EXPECT_EQ(answer2.frame.error.code, ErrorCode::bad_frame);
  // The Client reads the refusal even though the server closed while it was still sending.
  Client client(server->socket_path());
  try {
    client.infer("echo", {{"big", zeros({4 << 20}, TensorOptions(kUInt8))}});
    ADD_FAILURE() << "expected too_large";
  } catch (const SwitchError& e) {
    EXPECT_EQ(e.code(), ErrorCode::too_large) << e.what();
  }
  expect_alive();
}

TEST_F(SwitchServer, HandlerErrorsKeepTheConnection) {
  start();
  Client client(server->socket_path());
  const auto code_of = [&](const std::string& model) {
    try {
      client.infer(model, sample_inputs());
    } catch (const SwitchError& e) {
      return e.code();
    }
    return ErrorCode::internal;
  };
  EXPECT_EQ(code_of("no-such-model"), ErrorCode::unknown_model);
  EXPECT_EQ(code_of("shape-error"), ErrorCode::bad_input);
  EXPECT_EQ(code_of("internal-error"), ErrorCode::internal);
  EXPECT_TRUE(client.connected());
  EXPECT_EQ(client.infer("echo", sample_inputs()).outputs.size(), 1u);
  EXPECT_EQ(server->accepted_connections(), 1u);
  try {
    client.infer("sleep-200", sample_inputs(), 20ms);
    ADD_FAILURE() << "expected deadline_exceeded";
  } catch (const SwitchError& e) {
    EXPECT_EQ(e.code(), ErrorCode::deadline_exceeded);
    EXPECT_THAT(e.what(), HasSubstr("within 20 ms"));
  }
}

TEST_F(SwitchServer, ManyConcurrentClients) {
  start();
  constexpr int kClients = 16, kRequests = 25;
  std::vector<std::future<int>> done;
  for (int c = 0; c < kClients; ++c) {
    done.push_back(std::async(std::launch::async, [&, c] {
      Client client(server->socket_path());
      int ok = 0;
      for (int i = 0; i < kRequests; ++i) {
        Tensor x = full({2, 2}, static_cast<double>(c * 1000 + i), TensorOptions(kInt64));
        InferResult r = client.infer("echo", {{"x", x}}, 10s);
        ok += same_tensor(r.outputs.at(0).tensor, x) ? 1 : 0;
      }
      return ok;
    }));
  }
  for (auto& f : done) {
    ASSERT_EQ(f.wait_for(60s), std::future_status::ready);
    EXPECT_EQ(f.get(), kRequests);
  }
  // The server counts an answer once it is sent, so the count may trail the clients' last reads.
  EXPECT_TRUE(eventually([&] {
    return server->requests_answered() == uint64_t{kClients * kRequests};
  })) << server->requests_answered();
  EXPECT_TRUE(eventually([&] { return server->active_connections() == 0; }));
}

TEST_F(SwitchServer, ConnectionLimitAnswersBusy) {
  ServerOptions options;
  options.max_connections = 2;
  start(options);
  UniqueFd a = raw(), b = raw();
  ASSERT_TRUE(eventually([&] { return server->active_connections() == 2; }));
  UniqueFd c = raw();
  auto answer = read_answer(c.get(), 5s);
  ASSERT_EQ(answer.status, ReadStatus::ok);
  EXPECT_EQ(answer.frame.error.code, ErrorCode::busy);
  a.reset();
  b.reset();
  ASSERT_TRUE(eventually([&] { return server->active_connections() == 0; }));
  expect_alive();
}

TEST_F(SwitchServer, ClientsThatDieMidRequestLeakNothing) {
  start();
  const auto frame = encode_infer_request(InferRequest{1, "sleep-100", 0, sample_inputs()});
  {  // half a frame, then gone
    UniqueFd fd = raw();
    send_raw(fd.get(), std::span(frame).first(frame.size() / 2));
  }
  {  // a whole request, then gone before the answer
    UniqueFd fd = raw();
    send_raw(fd.get(), frame);
  }
  EXPECT_TRUE(eventually([&] { return handler->completed.load() == 1; }));
  EXPECT_TRUE(eventually([&] { return server->active_connections() == 0; }));
  expect_alive();
}

TEST_F(SwitchServer, StopDrainsRequestsInFlight) {
  start();
  const std::string path = server->socket_path();
  auto in_flight = std::async(std::launch::async, [&] {
    Client client(path);
    return client.infer("sleep-400", sample_inputs());
  });
  UniqueFd idle = raw();
  ASSERT_TRUE(eventually([&] { return handler->calls.load() == 1; }));
  const auto t0 = Clock::now();
  server->stop();
  EXPECT_GE(Clock::now() - t0, 100ms) << "stop waits for the request";
  ASSERT_EQ(in_flight.wait_for(10s), std::future_status::ready);
  InferResult r = in_flight.get();
  EXPECT_EQ(r.outputs.size(), 1u);
  EXPECT_TRUE(closed_by_peer(idle.get(), 2s)) << "idle connections are closed";
  EXPECT_EQ(server->active_connections(), 0u);
  EXPECT_THROW(Client(path, ClientOptions{200ms}), SwitchError) << "no longer accepting";
}

TEST_F(SwitchServer, TcpOnLoopback) {
  ServerOptions options;
  options.tcp_port = 0;
  start(options);
  ASSERT_NE(server->tcp_port(), 0);
  Client client = Client::tcp(server->tcp_port());
  EXPECT_TRUE(same_tensor(client.infer("echo", sample_inputs()).outputs.at(0).tensor,
                          sample_inputs()[0].tensor));
}

// Thousands of random and mutated frames at a live server, one connection each: the server
// answers or closes every one, within bounded time, and a good request still works after.
TEST_F(SwitchServer, LiveFuzz) {
  SCOPED_TRACE(::ferry::testing::seed_trace());
  ServerOptions options;
  options.read_timeout = 500ms;
  options.limits.max_frame_bytes = 1 << 20;
  start(options);
  std::mt19937_64 rng = ::ferry::testing::test_rng();
  const std::vector<std::vector<std::byte>> seeds = {
      encode_infer_request(InferRequest{1, "echo", 0, sample_inputs()}),
      encode_infer_request(InferRequest{2, "shape-error", 0, {}}),
      encode_error_response(3, ErrorCode::internal, "clients may not send this")};
  int answered = 0, closed = 0;
  for (int i = 0; i < 2000; ++i) {
    std::vector<std::byte> f = seeds[rng() % seeds.size()];
    const int kind = static_cast<int>(rng() % 3);
    if (kind == 0) {
      for (int k = 0, n = 1 + static_cast<int>(rng() % 6); k < n; ++k) {
        f[rng() % f.size()] = static_cast<std::byte>(rng());
      }
    } else if (kind == 1) {
      f.resize(rng() % (f.size() + 8));
    } else {
      f.resize(rng() % 64);
      for (auto& b : f) b = static_cast<std::byte>(rng());
    }
    UniqueFd fd = raw();
    send_raw(fd.get(), f);
    ::shutdown(fd.get(), SHUT_WR);
    while (true) {
      auto answer = read_answer(fd.get(), 5s);
      ASSERT_NE(answer.status, ReadStatus::timeout) << "frame " << i;
      if (answer.status != ReadStatus::ok) {
        ++closed;
        break;
      }
      ++answered;
    }
    if (i % 500 == 499) expect_alive();
  }
  EXPECT_GT(answered, 0);
  EXPECT_TRUE(eventually([&] { return server->active_connections() == 0; }));
  expect_alive();
}

}  // namespace
}  // namespace ferry::switch_
