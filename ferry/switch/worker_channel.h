// The messages between `ferry serve`'s controller and its worker processes, over one IpcConnection
// (a socketpair) per worker: the start-up handshake that hands a worker its device region, its
// workspace and every model's shared weights, then requests, evictions and their replies.
// Requests and replies carry the client protocol's own frames (protocol.h), so a worker answers
// exactly what an in-process handler would.
// Guarantees: every message is checked on receipt (magic, operation, lengths against the limits)
// before anything is allocated; a malformed or truncated message, a peer that hangs up and a
// receive past the connection's timeout all raise DeviceError, never crash.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ferry/device/ipc.h"
#include "ferry/device/ipc_handle.h"

namespace ferry::switch_ {

enum class WorkerOp : uint32_t {
  kReady = 1,     // worker -> controller after start-up; `value` holds its pid
  kInfer = 2,     // controller -> worker: payload is an infer-request frame
  kReply = 3,     // worker -> controller: payload is an infer-response or error-response frame
  kEvict = 4,     // controller -> worker: give the resident model's weights back
  kEvicted = 5,   // worker -> controller
  kShutdown = 6,  // controller -> worker: exit
  kFailed = 7,    // worker -> controller: `text` says why the worker cannot go on
};

struct WorkerMessage {
  WorkerOp op = WorkerOp::kReady;
  // kReady: the worker's pid; kInfer: the run's preemption token (0: not preemptible).
  uint64_t value = 0;
  // kInfer: the parameters sub-region [params_offset, +params_size) of the region to switch the
  // model into, and its groups (size 0: the model is resident already).
  uint64_t params_offset = 0;
  uint64_t params_size = 0;
  std::vector<uint64_t> group_ends;
  // kInfer with a switch: one flag per layer, 1 for a layer read in place from the mapped image
  // (direct host access); empty: none.
  std::vector<uint8_t> direct;
  std::string text;
  std::vector<std::byte> payload;
};

// What a worker receives when it starts.
struct WorkerModelImage {
  std::string name;
  uint64_t nbytes = 0;
  uint64_t fingerprint = 0;  // ModelImage::fingerprint of the controller's layout
  IpcHandle weights;         // a SharedHostBuffer (cpu); invalid for a model without weights
};
struct WorkerInit {
  std::string models_toml;  // to_models_toml(config, /*with_weights=*/false)
  IpcHandle region;         // the device region (its device is the worker's)
  uint64_t workspace_offset = 0;
  uint64_t workspace_size = 0;
  std::vector<WorkerModelImage> images;  // one per model of models_toml
};

// Frames larger than this are refused on receipt.
inline constexpr uint64_t kMaxWorkerPayload = uint64_t{1} << 32;

void send_worker_message(IpcConnection& connection, const WorkerMessage& message);
WorkerMessage receive_worker_message(IpcConnection& connection);

void send_worker_init(IpcConnection& connection, const WorkerInit& init);
WorkerInit receive_worker_init(IpcConnection& connection);

}  // namespace ferry::switch_
