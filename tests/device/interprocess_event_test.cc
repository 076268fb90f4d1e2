// Interprocess events on the sim: export and import within one process (errors, query,
// synchronize, stream waits), and across real processes (this binary re-executed as the child):
// a child records behind gated work and the parent's stream waits on the imported event and sees
// the child's bytes; a child that dies with a record pending makes the parent's waits end with a
// DeviceError naming the event.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "ferry/device/event.h"
#include "ferry/device/ipc.h"
#include "ferry/device/stream.h"
#include "tests/device/child_process.h"
#include "tests/device/sim_fixture.h"
#include "tests/support/errors.h"

namespace ferry::testing {
namespace {

using namespace std::chrono_literals;
using InterprocessEventTest = SimTest;

constexpr const char* kEventChildVariable = "FERRY_TEST_EVENT_CHILD";

TEST_F(InterprocessEventTest, ExportImportInOneProcessSharesRecords) {
  const Stream s = get_stream_from_pool(Device("sim:0"));
  Event exported = Event::interprocess(Device("sim:0"));
  EXPECT_TRUE(exported.is_interprocess());
  EXPECT_FALSE(exported.enable_timing());
  EXPECT_TRUE(exported.query()) << "an event never recorded is complete";
  Event imported = Event::from_ipc_handle(exported.ipc_handle());
  EXPECT_EQ(imported.device(), Device("sim:0"));
  EXPECT_TRUE(imported.query());

  constexpr size_t n = 1 << 16;
  SimBuffer x(0, n);
  PinnedBuffer pattern(n);
  PinnedBuffer out(n);
  for (size_t i = 0; i < n; ++i) pattern.get()[i] = static_cast<unsigned char>(i * 7 + 1);
  std::memset(out.get(), 0, n);
  Gate gate(10s);
  enqueue_host_function(s, gate.blocker());
  sim_backend().memcpy_async(0, x.get(), pattern.get(), n, CopyKind::HostToDevice, s.raw());
  exported.record(s);
  EXPECT_FALSE(exported.query());
  EXPECT_FALSE(imported.query()) << "a record through one handle is seen through the other";

  // Another stream waits on the imported event: its copy must see the gated bytes.
  const Stream waiter = get_stream_from_pool(Device("sim:0"));
  ASSERT_NE(waiter, s);
  imported.block(waiter);
  sim_backend().memcpy_async(0, out.get(), x.get(), n, CopyKind::DeviceToHost, waiter.raw());
  EXPECT_FALSE(waiter.query()) << "the waiting stream ran ahead of the event";
  gate.open();
  imported.synchronize();
  EXPECT_TRUE(exported.query());
  waiter.synchronize();
  EXPECT_FALSE(gate.timed_out());
  EXPECT_EQ(std::memcmp(out.get(), pattern.get(), n), 0);

  // Recording through the imported handle moves the mark for both.
  Gate second(10s);
  enqueue_host_function(waiter, second.blocker());
  imported.record(waiter);
  EXPECT_FALSE(exported.query());
  second.open();
  exported.synchronize();
  EXPECT_TRUE(imported.query());
}

TEST_F(InterprocessEventTest, BadUsesRaiseNamingWhatWasExpected) {
  Event plain;
  std::string message = error_of<DeviceError>([&] { (void)plain.ipc_handle(); });
  EXPECT_NE(message.find("expected an interprocess event"), std::string::npos) << message;
  plain.record(get_stream_from_pool(Device("sim:0")));
  message = error_of<DeviceError>([&] { (void)plain.ipc_handle(); });
  EXPECT_NE(message.find("expected an interprocess event"), std::string::npos) << message;
  message = error_of<DeviceError>([&] { (void)sim_backend().event_ipc_export(0, plain.raw()); });
  EXPECT_NE(message.find("sim:0: event_ipc_export: expected an interprocess event"),
            std::string::npos)
      << message;

  Event shared = Event::interprocess(Device("sim:1"));
  IpcHandle wrong_device = shared.ipc_handle();
  wrong_device.device = Device("sim:0");
  message = error_of<DeviceError>([&] { (void)Event::from_ipc_handle(wrong_device); });
  EXPECT_NE(message.find("sim:0: event_ipc_import: expected an event exported from sim:0"),
            std::string::npos)
      << message;
  IpcHandle no_fd = shared.ipc_handle();
  no_fd.fd.reset();
  message = error_of<DeviceError>([&] { (void)Event::from_ipc_handle(no_fd); });
  EXPECT_NE(message.find("expected the handle to carry the event's file descriptor"),
            std::string::npos)
      << message;
  // A memory handle is not an event handle.
  SimBuffer x(1, 4096);
  IpcHandle memory = export_ipc_handle(Device("sim:1"), x.get());
  message = error_of<DeviceError>([&] { (void)Event::from_ipc_handle(memory); });
  EXPECT_NE(
      message.find("sim:1: event_ipc_import: expected a sim event handle (8 bytes, FERRYEVT)"),
      std::string::npos)
      << message;
  // An event handle whose descriptor is a memory allocation's.
  IpcHandle swapped = shared.ipc_handle();
  swapped.fd = memory.fd.duplicate();
  message = error_of<DeviceError>([&] { (void)Event::from_ipc_handle(swapped); });
  EXPECT_NE(message.find("sim:1: event_ipc_import: expected an event exported from sim:1"),
            std::string::npos)
      << message;
  message = error_of<DeviceError>([&] { (void)Event::interprocess(Device(DeviceType::CPU)); });
  EXPECT_NE(message.find("expected a device"), std::string::npos) << message;
  // Interprocess events never time.
  Event start = Event::interprocess(Device("sim:1"));
  Event end = Event::interprocess(Device("sim:1"));
  EXPECT_THROW((void)start.elapsed_time(end), DeviceError);
  // Recording on another device's stream is refused.
  message = error_of<DeviceError>([&] { start.record(get_stream_from_pool(Device("sim:0"))); });
  EXPECT_NE(message.find("expected a stream on sim:1"), std::string::npos) << message;
}

// ---- across processes --------------------------------------------------------------------

// Child: writes a pattern into the parent's buffer behind a gate, records the parent's event,
// tells the parent, and opens the gate when the parent says so.
void record_behind_gate_child(const std::string& path, bool die_with_record_pending) {
  IpcConnection parent = IpcConnection::connect(path, 60s);
  parent.set_timeout(60s);
  IpcMapping mapping(parent.receive_handle());
  Event event = Event::from_ipc_handle(parent.receive_handle());
  const size_t n = mapping.size();
  const Stream s = get_stream_from_pool(mapping.device());
  PinnedBuffer pattern(n);
  for (size_t i = 0; i < n; ++i) pattern.get()[i] = static_cast<unsigned char>(i % 253 + 1);
  Gate gate(60s);
  enqueue_host_function(s, gate.blocker());
  get_backend(DeviceType::Sim)
      .memcpy_async(mapping.device().index(), mapping.get(), pattern.get(), n,
                    CopyKind::HostToDevice, s.raw());
  event.record(s);
  parent.send_value<uint8_t>(1);  // recorded
  if (die_with_record_pending) {
    parent.receive_value<uint8_t>();  // the parent has queued its wait
    std::_Exit(0);                    // the gate is still shut: the record never completes
  }
  parent.receive_value<uint8_t>();  // open the gate
  gate.open();
  s.synchronize();
  parent.send_value<uint8_t>(gate.timed_out() ? 0 : 1);
}

TEST_F(InterprocessEventTest, ParentStreamWaitsForChildRecordAndSeesChildBytes) {
  if (const char* path = child_socket_path(kEventChildVariable)) {
    record_behind_gate_child(path, /*die_with_record_pending=*/false);
    return;
  }
  constexpr size_t n = 1 << 20;
  SimBuffer x(0, n);
  sim_backend().memset(0, x.get(), 0, n);
  Event event = Event::interprocess(Device("sim:0"));
  const std::string path = child_socket_name("event");
  IpcListener listener(path);
  const pid_t child = spawn_test_child(kEventChildVariable, path);
  ASSERT_GT(child, 0);
  IpcConnection connection = accept_test_child(listener, child);
  ASSERT_TRUE(connection.is_open());
  connection.send_handle(export_ipc_handle(Device("sim:0"), x.get()));
  connection.send_handle(event.ipc_handle());
  ASSERT_EQ(connection.receive_value<uint8_t>(), 1);  // the child recorded behind its gate

  const Stream s = get_stream_from_pool(Device("sim:0"));
  PinnedBuffer out(n);
  std::memset(out.get(), 0xEE, n);
  event.block(s);
  sim_backend().memcpy_async(0, out.get(), x.get(), n, CopyKind::DeviceToHost, s.raw());
  EXPECT_FALSE(event.query()) << "the child's gated record completed early";
  EXPECT_FALSE(s.query()) << "the parent's stream did not wait for the child's record";
  connection.send_value<uint8_t>(1);  // open the gate
  s.synchronize();
  EXPECT_TRUE(event.query());
  EXPECT_EQ(connection.receive_value<uint8_t>(), 1) << "the child's gate timed out";
  EXPECT_EQ(wait_test_child(child), 0);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(out.get()[i], static_cast<unsigned char>(i % 253 + 1)) << "byte " << i;
  }
}

TEST_F(InterprocessEventTest, RecorderDyingWithRecordPendingEndsWaitsWithAnError) {
  if (const char* path = child_socket_path(kEventChildVariable)) {
    record_behind_gate_child(path, /*die_with_record_pending=*/true);
    return;
  }
  constexpr size_t n = 1 << 16;
  SimBuffer x(0, n);
  Event event = Event::interprocess(Device("sim:0"));
  const std::string path = child_socket_name("event-death");
  IpcListener listener(path);
  const pid_t child = spawn_test_child(kEventChildVariable, path);
  ASSERT_GT(child, 0);
  IpcConnection connection = accept_test_child(listener, child);
  ASSERT_TRUE(connection.is_open());
  connection.send_handle(export_ipc_handle(Device("sim:0"), x.get()));
  connection.send_handle(event.ipc_handle());
  ASSERT_EQ(connection.receive_value<uint8_t>(), 1);

  const Stream s = get_stream_from_pool(Device("sim:0"));
  event.block(s);
  EXPECT_FALSE(event.query());
  connection.send_value<uint8_t>(1);  // the child exits now, its record pending

  // query() never blocks: poll it (bounded) until it reports the dead recorder. The child is not
  // reaped yet, so this also covers a recorder that is a zombie.
  std::string message = "(no DeviceError within 30 s)";
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline) {
    try {
      if (event.query()) {
        message = "(query() returned true: the record was taken as complete)";
        break;
      }
    } catch (const DeviceError& e) {
      message = e.what();
      break;
    }
    std::this_thread::sleep_for(2ms);
  }
  // (ASSERT: with the error missing, the waits below would never end.)
  ASSERT_NE(message.find("sim:0: event_query: interprocess event"), std::string::npos) << message;
  EXPECT_NE(message.find("the recording process " + std::to_string(child) + " exited"),
            std::string::npos)
      << message;
  message = error_of<DeviceError>([&] { event.synchronize(); });
  EXPECT_NE(message.find("event_synchronize: interprocess event"), std::string::npos) << message;
  // The stream's queued wait ended too; its synchronize reports why.
  message = error_of<DeviceError>([&] { s.synchronize(); });
  EXPECT_NE(message.find("stream_wait_event: interprocess event"), std::string::npos) << message;
  EXPECT_TRUE(s.query());
  EXPECT_EQ(wait_test_child(child), 0);
}

}  // namespace
}  // namespace ferry::testing
