// Pipelined model transmission with device-side waits (see pipelined_switch.h).
#include "ferry/switch/pipelined_switch.h"

#include <chrono>
#include <cstdio>
#include <mutex>
#include <sstream>
#include <thread>

#include "ferry/autograd/grad_mode.h"
#include "ferry/core/error.h"
#include "ferry/core/json_text.h"
#include "ferry/device/guard.h"
#include "ferry/device/ipc.h"
#include "ferry/memory/memory_resource.h"
#include "ferry/ops/factories.h"
#include "ferry/switch/grouping.h"

namespace ferry::switch_ {
namespace {

using Clock = std::chrono::steady_clock;

// Fills a SwitchTrace from host functions queued on the streams (which run on other threads).
class TraceRecorder : public std::enable_shared_from_this<TraceRecorder> {
 public:
  explicit TraceRecorder(std::shared_ptr<SwitchTrace> trace)
      : trace_(std::move(trace)), start_(Clock::now()) {}

  // Queues, on `stream`, the start of a new span; returns its index for finish().
  size_t begin(const Stream& stream, std::string name, const char* stream_name) {
    size_t index;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      index = trace_->spans.size();
      trace_->spans.push_back({std::move(name), stream_name, 0, 0});
    }
    enqueue_host_function(stream, [self = shared_from_this(), index] { self->stamp(index, true); });
    return index;
  }
  void finish(const Stream& stream, size_t index) {
    enqueue_host_function(stream,
                          [self = shared_from_this(), index] { self->stamp(index, false); });
  }

 private:
  void stamp(size_t index, bool start) {
    const double t = std::chrono::duration<double>(Clock::now() - start_).count();
    std::lock_guard<std::mutex> lock(mutex_);
    (start ? trace_->spans[index].start_s : trace_->spans[index].end_s) = t;
  }

  std::shared_ptr<SwitchTrace> trace_;
  Clock::time_point start_;
  std::mutex mutex_;
};

// PipeSwitch's hand-off: a thread synchronizes on each group's event in turn and sends one byte
// per group; the launching thread receives it before queueing the group's layers.
class HostHandOff {
 public:
  explicit HostHandOff(const std::vector<Event>& arrivals) {
    auto [sender, receiver] = IpcConnection::pair();
    receiver_ = std::move(receiver);
    receiver_.set_timeout(std::chrono::minutes(5));
    waiter_ = std::thread([&arrivals, sender = std::move(sender)]() mutable {
      try {
        for (const Event& arrival : arrivals) {
          arrival.synchronize();
          sender.send_value<char>(1);
        }
      } catch (const Error&) {
        // The launching side sees the connection close and reports it.
      }
    });
  }
  HostHandOff(const HostHandOff&) = delete;
  HostHandOff& operator=(const HostHandOff&) = delete;
  ~HostHandOff() { waiter_.join(); }

  void wait_for_next_group() { (void)receiver_.receive_value<char>(); }

 private:
  IpcConnection receiver_;
  std::thread waiter_;
};

}  // namespace

std::string SwitchTrace::chrome_trace_json(const std::string& process_name) const {
  std::ostringstream out;
  out << "[{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":{\"name\":"
      << json_quoted(process_name) << "}}";
  out << ",{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":1,\"args\":{\"name\":"
         "\"copy stream\"}}";
  out << ",{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":2,\"args\":{\"name\":"
         "\"compute stream\"}}";
  char number[64];
  for (const Span& span : spans) {
    const bool copy = span.stream == "copy";
    out << ",{\"name\":" << json_quoted(span.name) << ",\"cat\":\"" << (copy ? "copy" : "compute")
        << "\",\"ph\":\"X\",\"pid\":1,\"tid\":" << (copy ? 1 : 2);
    std::snprintf(number, sizeof(number), ",\"ts\":%.3f,\"dur\":%.3f}", span.start_s * 1e6,
                  std::max(0.0, span.end_s - span.start_s) * 1e6);
    out << number;
  }
  out << "]";
  return out.str();
}

SwitchStreams switch_streams(Device device) {
  SwitchStreams streams{get_stream_from_pool(device), get_stream_from_pool(device)};
  while (streams.copy == streams.compute) streams.compute = get_stream_from_pool(device);
  return streams;
}

QueuedSwitch switch_in(const ModelImage& image, const std::vector<SwitchLayer>& layers,
                       std::span<const size_t> group_ends, const Tensor& input,
                       const SwitchStreams& streams, const SwitchOptions& options) {
  FERRY_CHECK(!streams.copy.is_cpu() && !streams.compute.is_cpu(),
              "switch_in: expected device streams, got ", streams.copy, " and ", streams.compute);
  FERRY_CHECK(streams.copy.device() == streams.compute.device(),
              "switch_in: expected the copy and compute streams on one device, got ", streams.copy,
              " and ", streams.compute);
  FERRY_CHECK(!(streams.copy == streams.compute), "switch_in: expected two different streams, got ",
              streams.copy, " twice");
  const Device device = streams.compute.device();
  FERRY_CHECK(input.defined() && input.device() == device, "switch_in: expected the input on ",
              device, ", got ", input.defined() ? input.device().str() : std::string("none"));
  FERRY_CHECK(image.layer_count() == layers.size(), "switch_in: expected the ", image.layer_count(),
              " layers the image was built from, got ", layers.size());
  check_grouping(group_ends, layers.size());

  NoGradGuard no_grad;
  std::shared_ptr<TraceRecorder> recorder;  // each queued host function holds it too
  if (options.trace) recorder = std::make_shared<TraceRecorder>(options.trace);
  QueuedSwitch queued;
  if (image.nbytes() > 0) {
    StreamGuard on_compute(streams.compute);
    std::optional<memory::UseMemPool> weights_pool;
    if (options.weights_pool) weights_pool.emplace(*options.weights_pool);
    queued.block =
        empty({static_cast<int64_t>(image.nbytes())}, TensorOptions().dtype(kUInt8).device(device));
  }
  // The copy stream writes a block that belongs to the compute stream: it starts after what the
  // compute stream has queued so far (which may still use the memory under its old owner), and
  // the block is not reused before the copies are done.
  streams.copy.wait_stream(streams.compute);
  if (queued.block.defined()) memory::record_stream(queued.block, streams.copy);
  image.bind(queued.block);
  if (options.direct) bind_direct(image, options.direct->mapped, options.direct->direct);

  // Every copy first, so the copy stream runs ahead; then every layer, each group behind its
  // event.
  std::vector<size_t> group_arrival(group_ends.size(), SIZE_MAX);
  {
    StreamGuard on_copy(streams.copy);
    queued.arrivals.reserve(group_ends.size());
    size_t first = 0;
    for (size_t g = 0; g < group_ends.size(); ++g) {
      const auto ranges = group_copy_ranges(image, first, group_ends[g],
                                            options.direct ? &options.direct->direct : nullptr);
      first = group_ends[g];
      if (ranges.empty()) continue;
      const size_t span =
          recorder ? recorder->begin(streams.copy, "group " + std::to_string(g + 1), "copy") : 0;
      for (const auto& [begin, end] : ranges) {
        const auto offset = static_cast<int64_t>(begin);
        const auto length = static_cast<int64_t>(end - begin);
        queued.block.narrow(0, offset, length)
            .copy_(image.host().narrow(0, offset, length), /*non_blocking=*/true);
      }
      if (recorder) recorder->finish(streams.copy, span);
      queued.arrivals.emplace_back();
      queued.arrivals.back().record(streams.copy);
      group_arrival[g] = queued.arrivals.size() - 1;
    }
  }
  std::unique_ptr<HostHandOff> host_hand_off;
  if (options.hand_off == HandOff::kHostSync) {
    host_hand_off = std::make_unique<HostHandOff>(queued.arrivals);
  }
  StreamGuard on_compute(streams.compute);
  Tensor x = input;
  size_t first = 0;
  for (size_t g = 0; g < group_ends.size(); ++g) {
    if (group_arrival[g] != SIZE_MAX) {
      if (host_hand_off) {
        host_hand_off->wait_for_next_group();
      } else {
        streams.compute.wait_event(queued.arrivals[group_arrival[g]]);
      }
    }
    for (size_t i = first; i < group_ends[g]; ++i) {
      const size_t span =
          recorder ? recorder->begin(streams.compute, layers[i].name, "compute") : 0;
      x = layers[i].run(x);
      if (recorder) recorder->finish(streams.compute, span);
    }
    first = group_ends[g];
  }
  queued.output = x;
  return queued;
}

void switch_out(const ModelImage& image) { image.bind_host(); }

}  // namespace ferry::switch_
