// Encoding and checking the controller-worker messages (worker_channel.h).
#include "ferry/switch/worker_channel.h"

#include "ferry/core/error.h"

namespace ferry::switch_ {
namespace {

constexpr uint32_t kWorkerMagic = 0x4B524f57;  // "WORK"
constexpr uint32_t kMaxGroups = 1 << 16;
constexpr uint32_t kMaxText = 1 << 20;
constexpr uint32_t kMaxModels = 1 << 12;

struct MessageHeader {
  uint32_t magic;
  uint32_t op;
  uint64_t value;
  uint64_t params_offset;
  uint64_t params_size;
  uint32_t group_count;
  uint32_t direct_count;
  uint32_t text_bytes;
  uint64_t payload_bytes;
};

void send_text(IpcConnection& c, const std::string& text) {
  c.send_value<uint32_t>(static_cast<uint32_t>(text.size()));
  c.send_bytes(text.data(), text.size());
}

std::string receive_text(IpcConnection& c, uint32_t limit, const char* what) {
  const auto n = c.receive_value<uint32_t>();
  FERRY_CHECK_AS(DeviceError, n <= limit, "serve worker channel: expected ", what, " of at most ",
                 limit, " bytes, got ", n);
  std::string text(n, '\0');
  c.receive_bytes(text.data(), n);
  return text;
}

}  // namespace

void send_worker_message(IpcConnection& c, const WorkerMessage& m) {
  FERRY_CHECK(m.group_ends.size() <= kMaxGroups && m.direct.size() <= kMaxGroups &&
                  m.text.size() <= kMaxText && m.payload.size() <= kMaxWorkerPayload,
              "serve worker channel: a message of ", m.group_ends.size(), " groups, ",
              m.text.size(), " text bytes and ", m.payload.size(), " payload bytes is too large");
  const MessageHeader header{kWorkerMagic,
                             static_cast<uint32_t>(m.op),
                             m.value,
                             m.params_offset,
                             m.params_size,
                             static_cast<uint32_t>(m.group_ends.size()),
                             static_cast<uint32_t>(m.direct.size()),
                             static_cast<uint32_t>(m.text.size()),
                             m.payload.size()};
  c.send_value(header);
  c.send_bytes(m.group_ends.data(), m.group_ends.size() * sizeof(uint64_t));
  c.send_bytes(m.direct.data(), m.direct.size());
  c.send_bytes(m.text.data(), m.text.size());
  c.send_bytes(m.payload.data(), m.payload.size());
}

WorkerMessage receive_worker_message(IpcConnection& c) {
  const auto header = c.receive_value<MessageHeader>();
  FERRY_CHECK_AS(DeviceError, header.magic == kWorkerMagic,
                 "serve worker channel: expected a message starting with magic ", kWorkerMagic,
                 ", got ", header.magic);
  FERRY_CHECK_AS(DeviceError,
                 header.op >= static_cast<uint32_t>(WorkerOp::kReady) &&
                     header.op <= static_cast<uint32_t>(WorkerOp::kFailed),
                 "serve worker channel: expected an operation in [1, 7], got ", header.op);
  FERRY_CHECK_AS(DeviceError,
                 header.group_count <= kMaxGroups && header.direct_count <= kMaxGroups &&
                     header.text_bytes <= kMaxText && header.payload_bytes <= kMaxWorkerPayload,
                 "serve worker channel: expected at most ", kMaxGroups, " groups, ", kMaxText,
                 " text bytes and ", kMaxWorkerPayload, " payload bytes, got ", header.group_count,
                 ", ", header.text_bytes, " and ", header.payload_bytes);
  WorkerMessage m;
  m.op = static_cast<WorkerOp>(header.op);
  m.value = header.value;
  m.params_offset = header.params_offset;
  m.params_size = header.params_size;
  m.group_ends.resize(header.group_count);
  c.receive_bytes(m.group_ends.data(), m.group_ends.size() * sizeof(uint64_t));
  m.direct.resize(header.direct_count);
  c.receive_bytes(m.direct.data(), m.direct.size());
  m.text.resize(header.text_bytes);
  c.receive_bytes(m.text.data(), m.text.size());
  m.payload.resize(header.payload_bytes);
  c.receive_bytes(m.payload.data(), m.payload.size());
  return m;
}

void send_worker_init(IpcConnection& c, const WorkerInit& init) {
  send_text(c, init.models_toml);
  c.send_handle(init.region);
  c.send_value<uint64_t>(init.workspace_offset);
  c.send_value<uint64_t>(init.workspace_size);
  c.send_value<uint32_t>(static_cast<uint32_t>(init.images.size()));
  for (const WorkerModelImage& image : init.images) {
    send_text(c, image.name);
    c.send_value<uint64_t>(image.nbytes);
    c.send_value<uint64_t>(image.fingerprint);
    c.send_value<uint8_t>(image.nbytes > 0 ? 1 : 0);
    if (image.nbytes > 0) c.send_handle(image.weights);
  }
}

WorkerInit receive_worker_init(IpcConnection& c) {
  WorkerInit init;
  init.models_toml = receive_text(c, kMaxText, "the models' TOML");
  init.region = c.receive_handle();
  init.workspace_offset = c.receive_value<uint64_t>();
  init.workspace_size = c.receive_value<uint64_t>();
  const auto count = c.receive_value<uint32_t>();
  FERRY_CHECK_AS(DeviceError, count <= kMaxModels, "serve worker channel: expected at most ",
                 kMaxModels, " models, got ", count);
  for (uint32_t i = 0; i < count; ++i) {
    WorkerModelImage image;
    image.name = receive_text(c, 4096, "a model name");
    image.nbytes = c.receive_value<uint64_t>();
    image.fingerprint = c.receive_value<uint64_t>();
    if (c.receive_value<uint8_t>() != 0) image.weights = c.receive_handle();
    init.images.push_back(std::move(image));
  }
  return init;
}

}  // namespace ferry::switch_
