// The in-process model server's request handler (local_handler.h).
#include "ferry/switch/local_handler.h"

#include <chrono>

#include "ferry/autograd/grad_mode.h"
#include "ferry/device/runtime.h"

namespace ferry::switch_ {
namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

void synchronize(Device device) {
  if (!device.is_cpu()) device_synchronize(device);
}

}  // namespace

std::vector<Device> parse_device_list(const std::string& spec) {
  std::vector<Device> devices;
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t comma = std::min(spec.find(',', start), spec.size());
    const std::string name = spec.substr(start, comma - start);
    if (name.empty()) {
      throw ConfigError(
          "--devices: expected a comma-separated list such as \"sim:0,sim:1\", but "
          "got \"" +
          spec + "\"");
    }
    devices.push_back(checked_device(Device(name)));
    start = comma + 1;
  }
  return devices;
}

LocalHandler::LocalHandler(const ServeConfig& config, std::vector<Device> devices) {
  if (devices.empty()) throw ConfigError("expected at least one device, but got none");
  if (config.models.empty()) throw ConfigError("expected at least one model, but got none");
  size_t next = 0;
  for (const ModelConfig& m : config.models) {
    auto entry = std::make_unique<Entry>();
    entry->model = build_served_model(m, devices[next++ % devices.size()]);
    models_.emplace(m.name, std::move(entry));
  }
}

std::vector<std::string> LocalHandler::model_names() const {
  std::vector<std::string> names;
  for (const auto& [name, entry] : models_) names.push_back(name);
  return names;
}

LocalHandler::Entry& LocalHandler::find(const std::string& model) const {
  auto it = models_.find(model);
  if (it == models_.end()) {
    std::string known;
    for (const auto& [name, entry] : models_) known += (known.empty() ? "" : ", ") + name;
    throw SwitchError(ErrorCode::unknown_model,
                      "unknown model '" + model + "' (this server has: " + known + ")");
  }
  return *it->second;
}

Device LocalHandler::device_of(const std::string& model) const {
  return find(model).model->device();
}

InferResult LocalHandler::handle(const InferRequest& request) {
  Entry& entry = find(request.model);
  ServedModel& model = *entry.model;
  std::vector<Tensor> inputs = model.match_inputs(request.model, request.inputs);
  model.check_values(request.model, inputs);

  InferResult result;
  const auto t0 = Clock::now();
  std::lock_guard lock(entry.mutex);
  const auto t1 = Clock::now();
  result.timings.queue_ms = ms_between(t0, t1);
  if (request.deadline_ms != 0 && request.received != Clock::time_point{} &&
      ms_between(request.received, t1) > request.deadline_ms) {
    throw SwitchError(
        ErrorCode::deadline_exceeded,
        detail::str_cat("expected to start within ", request.deadline_ms, " ms, but model '",
                        request.model, "' was busy for ", ms_between(request.received, t1), " ms"));
  }
  autograd::NoGradGuard no_grad;
  const Device device = model.device();
  for (Tensor& t : inputs) {
    if (t.defined()) t = t.to(device);
  }
  synchronize(device);
  const auto t2 = Clock::now();
  std::vector<NamedTensor> outputs = model.run(inputs);
  synchronize(device);
  const auto t3 = Clock::now();
  for (NamedTensor& o : outputs) o.tensor = o.tensor.cpu().contiguous();
  const auto t4 = Clock::now();
  result.timings.transfer_ms = ms_between(t1, t2) + ms_between(t3, t4);
  result.timings.compute_ms = ms_between(t2, t3);
  result.outputs = std::move(outputs);
  return result;
}

}  // namespace ferry::switch_
