// remote_send / remote_recv and their backward (see remote.h).
#include "ferry/pipeline/remote.h"

#include "ferry/autograd/grad_mode.h"
#include "ferry/ops/factories.h"
#include "ferry/pipeline/dependency.h"
#include "ferry/pipeline/function.h"

namespace ferry::pipeline {

Placement parse_placement(const std::string& text) {
  if (text.rfind("rank", 0) != 0) return Placement{0, Device(text)};
  const size_t colon = text.find(':');
  FERRY_CHECK(colon != std::string::npos && colon > 4,
              "GPipe: expected a placement like \"rank1:sim:0\" or a device, but got \"", text,
              "\"");
  int rank = -1;
  try {
    size_t used = 0;
    rank = std::stoi(text.substr(4, colon - 4), &used);
    if (used != colon - 4) rank = -1;
  } catch (const std::exception&) {
    rank = -1;
  }
  FERRY_CHECK(rank >= 0, "GPipe: expected a rank number after \"rank\" in \"", text, "\"");
  return Placement{rank, Device(text.substr(colon + 1))};
}

void SendLog::add(transport::Future<void> send) {
  std::lock_guard<std::mutex> lock(mutex_);
  sends_.push_back(std::move(send));
}

void SendLog::drain() {
  std::vector<transport::Future<void>> sends;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    sends.swap(sends_);
  }
  for (auto& s : sends) s.wait();
}

uint64_t remote_tag(uint64_t run, int64_t boundary, int64_t microbatch, bool gradient) {
  FERRY_CHECK(boundary >= 0 && boundary < 256, "GPipe: expected fewer than 256 partitions across ",
              "ranks, but a boundary is at ", boundary);
  FERRY_CHECK(microbatch >= 0 && microbatch <= kCountSlot, "GPipe: expected fewer than ",
              kCountSlot, " micro-batches across ranks, but got micro-batch ", microbatch);
  // 16 bits of run (wrapping), 8 of boundary, 11 of micro-batch, 1 of direction: 36 bits.
  return ((run & 0xffff) << 20) | (uint64_t(boundary) << 12) | (uint64_t(microbatch) << 1) |
         (gradient ? 1 : 0);
}

Tensor remote_send(const transport::Group& group, int to, uint64_t tag, uint64_t gradient_tag,
                   const Tensor& x, const std::shared_ptr<SendLog>& log) {
  log->add(group.endpoint().send(x, group.peer(to), tag));
  variable_list out{get_phony(x.device(), /*requires_grad=*/false)};
  auto endpoint = group.shared_endpoint();
  const transport::PeerId peer = group.peer(to);
  const Device device = x.device();
  record_function("ferry::pipeline::RemoteSend", {x}, out,
                  [endpoint, peer, gradient_tag, device](variable_list) -> variable_list {
                    return {endpoint->recv(peer, gradient_tag, TensorOptions(device)).get()};
                  });
  return out[0];
}

Tensor remote_recv(const transport::Group& group, int from, uint64_t tag, uint64_t gradient_tag,
                   Device device, bool requires_grad, const std::shared_ptr<SendLog>& log) {
  const Tensor x = group.endpoint().recv(group.peer(from), tag, TensorOptions(device)).get();
  if (!requires_grad || !autograd::GradMode::is_enabled()) return x;
  // The node needs an input that requires grad to be recorded: a phony leaf, whose gradient
  // nobody reads.
  const Tensor anchor = get_phony(device, /*requires_grad=*/true);
  variable_list out{x};
  auto endpoint = group.shared_endpoint();
  const transport::PeerId peer = group.peer(from);
  std::weak_ptr<SendLog> weak_log = log;
  const std::vector<int64_t> sizes(x.sizes().begin(), x.sizes().end());
  const ScalarType dtype = x.scalar_type();
  record_function("ferry::pipeline::RemoteRecv", {anchor}, out,
                  [endpoint, peer, gradient_tag, weak_log, sizes, dtype,
                   device](variable_list grads) -> variable_list {
                    const Tensor grad = grads[0].defined()
                                            ? grads[0]
                                            : zeros(sizes, TensorOptions(dtype).device(device));
                    auto send = endpoint->send(grad, peer, gradient_tag);
                    if (auto log = weak_log.lock()) {
                      log->add(std::move(send));
                    } else {
                      send.wait();
                    }
                    return {Tensor()};
                  });
  return out[0];
}

}  // namespace ferry::pipeline
