// The serve worker process's loop (serve_worker.h).
#include "ferry/switch/serve_worker.h"

#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>

#include "ferry/core/error.h"
#include "ferry/device/guard.h"
#include "ferry/device/ipc.h"
#include "ferry/memory/mem_pool.h"
#include "ferry/memory/shared_host_buffer.h"
#include "ferry/memory/shared_region.h"
#include "ferry/ops/factories.h"
#include "ferry/switch/device_run.h"
#include "ferry/switch/model_config.h"
#include "ferry/switch/protocol.h"
#include "ferry/switch/worker_channel.h"

namespace ferry::switch_ {
namespace {

constexpr const char* kRegion = "serve";
constexpr const char* kWorkspace = "workspace";
constexpr const char* kParams = "params";

// The token of the last preemption the controller signalled (sigqueue SIGUSR1 with the token of
// the run to stop): a run stops when it matches its own token, so a late signal for an earlier
// run never stops a later one.
std::atomic<int> g_preempt_token{0};

extern "C" void on_preempt_signal(int, siginfo_t* info, void*) {
  g_preempt_token.store(info->si_value.sival_int, std::memory_order_release);
}

void install_preempt_handler() {
  struct sigaction action {};
  action.sa_sigaction = on_preempt_signal;
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&action.sa_mask);
  ::sigaction(kPreemptSignal, &action, nullptr);
}

// A model's weights as the controller shared them: a host tensor over the mapped buffer.
Tensor shared_image_bytes(const WorkerModelImage& image) {
  auto buffer =
      std::make_shared<memory::SharedHostBuffer>(memory::SharedHostBuffer::import(image.weights));
  void* data = buffer->data();
  return from_blob(
      data, {static_cast<int64_t>(image.nbytes)}, {1}, [buffer](void*) mutable { buffer.reset(); },
      TensorOptions().dtype(kUInt8));
}

class Worker {
 public:
  explicit Worker(IpcConnection connection) : channel_(std::move(connection)) {}

  void start() {
    WorkerInit init = receive_worker_init(channel_);
    device_ = init.region.device;
    DeviceGuard device_guard(device_);
    region_ = IpcMapping(init.region);
    memory::adopt_shared_region(device_, kRegion, region_.get(), region_.size());
    workspace_ = memory::add_sub_region(device_, kRegion, kWorkspace, init.workspace_offset,
                                        init.workspace_size);
    streams_ = switch_streams(device_);
    const ServeConfig config = parse_models_toml(init.models_toml, "/", "the controller's models");
    FERRY_CHECK(config.models.size() == init.images.size(), "serve worker: expected ",
                config.models.size(), " model images, got ", init.images.size());
    for (size_t i = 0; i < config.models.size(); ++i) {
      const WorkerModelImage& image = init.images[i];
      FERRY_CHECK(image.name == config.models[i].name, "serve worker: expected the image of '",
                  config.models[i].name, "', got '", image.name, "'");
      Tensor bytes = image.nbytes > 0 ? shared_image_bytes(image) : Tensor();
      models_.emplace(image.name, std::make_unique<ServedModel>(config.models[i], ZooInputShape{},
                                                                bytes, image.fingerprint));
    }
    // Prime the workspace and the streams, so the first request pays for neither.
    {
      memory::UseMemPool use(*workspace_);
      StreamGuard on_compute(streams_.compute);
      Tensor warm = empty({1 << 16}, TensorOptions().dtype(kUInt8).device(device_));
      warm.zero_();
      streams_.compute.synchronize();
    }
    WorkerMessage ready;
    ready.op = WorkerOp::kReady;
    ready.value = static_cast<uint64_t>(::getpid());
    send_worker_message(channel_, ready);
  }

  // Tells the controller why start() failed (best effort: it may be gone).
  void report_failure(const std::string& why) noexcept {
    try {
      WorkerMessage failed;
      failed.op = WorkerOp::kFailed;
      failed.text = why;
      send_worker_message(channel_, failed);
    } catch (const std::exception&) {
      // Nobody is listening; the exit status says it.
    }
  }

  // Serves messages until told to stop; returns normally on kShutdown.
  void serve() {
    while (true) {
      WorkerMessage message = receive_worker_message(channel_);
      switch (message.op) {
        case WorkerOp::kInfer:
          reply(message);
          break;
        case WorkerOp::kEvict: {
          evict();
          WorkerMessage done;
          done.op = WorkerOp::kEvicted;
          send_worker_message(channel_, done);
          break;
        }
        case WorkerOp::kShutdown:
          evict();
          return;
        default:
          FERRY_FAIL_AS(DeviceError, "serve worker: unexpected message ",
                        static_cast<uint32_t>(message.op), " from the controller");
      }
    }
  }

 private:
  void reply(const WorkerMessage& message) {
    WorkerMessage out;
    out.op = WorkerOp::kReply;
    uint64_t id = 0;
    try {
      DecodedFrame frame = decode_frame(message.payload);
      id = frame.request.id;
      InferResult result = infer(frame.request, message);
      out.payload = encode_infer_response(id, result);
    } catch (...) {
      auto [code, text] = classify_error(std::current_exception());
      out.payload = encode_error_response(id, code, text);
    }
    send_worker_message(channel_, out);
  }

  InferResult infer(const InferRequest& request, const WorkerMessage& message) {
    auto it = models_.find(request.model);
    if (it == models_.end()) {
      throw SwitchError(ErrorCode::unknown_model,
                        "serve worker: unknown model '" + request.model + "'");
    }
    ServedModel& model = *it->second;
    std::vector<Tensor> inputs = model.match_inputs(request.inputs);
    const bool switching = message.params_size > 0;
    DirectPlan plan;
    SwitchOptions options;
    if (switching) {
      evict();
      plan.grouping.ends.assign(message.group_ends.begin(), message.group_ends.end());
      if (!message.direct.empty()) {
        FERRY_CHECK(message.direct.size() == model.layers().size(), "serve worker: expected ",
                    model.layers().size(), " direct-access flags for model '", request.model,
                    "', got ", message.direct.size());
        for (uint8_t flag : message.direct) plan.direct.push_back(flag != 0);
      }
      options.weights_pool = memory::add_sub_region(device_, kRegion, kParams,
                                                    message.params_offset, message.params_size);
    } else {
      FERRY_CHECK(resident_ == request.model, "serve worker: expected model '", request.model,
                  "' to be resident here, but ",
                  resident_.empty() ? std::string("none is") : "'" + resident_ + "' is");
    }
    memory::UseMemPool use(*workspace_);
    // A nonzero value: the run may be preempted, by a signal carrying this token.
    const int token = static_cast<int>(message.value);
    std::function<bool()> should_stop;
    if (token != 0 && !switching) {
      should_stop = [token] { return g_preempt_token.load(std::memory_order_acquire) == token; };
    }
    try {
      DeviceRun run = run_on_device(model, std::move(inputs), streams_, switching ? &plan : nullptr,
                                    options, should_stop);
      if (switching) {
        resident_ = request.model;
        block_ = run.block;
      }
      return InferResult{std::move(run.outputs), run.timings};
    } catch (...) {
      if (switching) memory::drop_sub_region(device_, kRegion, kParams);
      throw;
    }
  }

  // Gives the resident model's weights back to its shared image and drops its sub-region.
  void evict() {
    if (resident_.empty()) return;
    streams_.compute.synchronize();
    streams_.copy.synchronize();
    switch_out(models_.at(resident_)->image());
    block_ = Tensor();
    resident_.clear();
    memory::drop_sub_region(device_, kRegion, kParams);
  }

  IpcConnection channel_;
  Device device_;
  IpcMapping region_;
  std::optional<memory::MemPool> workspace_;
  SwitchStreams streams_;
  std::map<std::string, std::unique_ptr<ServedModel>> models_;
  std::string resident_;
  Tensor block_;
};

}  // namespace

int run_serve_worker(int channel_fd, pid_t parent) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) return 1;  // the controller is already gone
  install_preempt_handler();
  Worker worker{IpcConnection(UniqueFd(channel_fd))};
  try {
    worker.start();
  } catch (const std::exception& e) {
    worker.report_failure(e.what());
    return 2;
  }
  try {
    worker.serve();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ferry switch-worker %d: %s\n", static_cast<int>(::getpid()), e.what());
    return 3;
  }
  return 0;
}

}  // namespace ferry::switch_
