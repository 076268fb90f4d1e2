// The serving handler's resident-model cache and pipelined switch-in (switching_handler.h).
#include "ferry/switch/switching_handler.h"

#include <algorithm>
#include <chrono>

#include "ferry/autograd/grad_mode.h"
#include "ferry/device/event.h"
#include "ferry/device/guard.h"
#include "ferry/device/runtime.h"
#include "ferry/ops/factories.h"
#include "ferry/switch/device_run.h"
#include "ferry/switch/switch_profile.h"

namespace ferry::switch_ {
namespace {

using HandlerClock = std::chrono::steady_clock;

std::string mib_text(uint64_t bytes) {
  return detail::str_cat(bytes, " bytes (", static_cast<double>(bytes) / (1 << 20), " MiB)");
}

}  // namespace

struct SwitchingHandler::ModelState {
  std::unique_ptr<ServedModel> model;
  std::vector<DirectPlan> plans;  // per device index
  std::optional<size_t> device;   // where resident
  Tensor block;                   // the device block its weights view while resident
  uint64_t last_used = 0;
  int running = 0;
};

struct SwitchingHandler::DeviceState {
  Device device;
  SwitchStreams streams;
  uint64_t capacity = 0;
  uint64_t used = 0;
  bool busy = false;
};

void check_serving_setup(const ServeConfig& config, const std::vector<Device>& devices) {
  if (devices.empty()) throw ConfigError("expected at least one device, but got none");
  if (config.models.empty()) throw ConfigError("expected at least one model, but got none");
  for (size_t d = 0; d < devices.size(); ++d) {
    for (size_t e = 0; e < d; ++e) {
      if (devices[e] == devices[d]) {
        throw ConfigError(detail::str_cat("--devices: expected each device once, but ",
                                          devices[d].str(), " is given twice"));
      }
    }
    if (devices[d].is_cpu()) {
      throw ConfigError(
          detail::str_cat("ferry serve: expected Sim or CUDA devices, got ", devices[d].str()));
    }
  }
}

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

SwitchingHandler::SwitchingHandler(const ServeConfig& config, std::vector<Device> devices,
                                   SwitchingOptions options)
    : options_(std::move(options)), devices_(std::move(devices)) {
  check_serving_setup(config, devices_);
  for (size_t d = 0; d < devices_.size(); ++d) {
    auto state = std::make_unique<DeviceState>();
    state->device = devices_[d];
    state->streams = switch_streams(devices_[d]);
    state->capacity =
        options_.resident_bytes != 0
            ? options_.resident_bytes
            : static_cast<uint64_t>(static_cast<double>(memory_info(devices_[d]).free) *
                                    kDefaultResidentFraction);
    device_states_.push_back(std::move(state));
  }
  for (const ModelConfig& m : config.models) {
    auto state = std::make_unique<ModelState>();
    state->model = options_.load_model ? options_.load_model(m, options_.profile_shape)
                                       : std::make_unique<ServedModel>(m, options_.profile_shape);
    const uint64_t bytes = state->model->weight_bytes();
    bool fits_somewhere = false;
    std::string capacities;
    for (const auto& d : device_states_) {
      fits_somewhere = fits_somewhere || bytes <= d->capacity;
      capacities += detail::str_cat(capacities.empty() ? "" : ", ", d->device.str(), ": ",
                                    mib_text(d->capacity));
    }
    if (!fits_somewhere) {
      throw SwitchError(ErrorCode::too_large,
                        detail::str_cat("model '", m.name, "' needs ", mib_text(bytes),
                                        " of device memory for its weights, but the resident "
                                        "capacity is ",
                                        capacities, " (see --resident-bytes)"));
    }
    models_.emplace(m.name, std::move(state));
  }

  // Profile every (model, device) once and plan its switch.
  for (size_t d = 0; d < device_states_.size(); ++d) {
    DeviceState& device = *device_states_[d];
    const LinkProfile link = measure_link(device.device, options_.profile_repeats);
    for (auto& [name, state] : models_) {
      ServedModel& model = *state->model;
      state->plans.push_back(model.weight_bytes() > device.capacity
                                 ? DirectPlan{}
                                 : plan_switch(model, device.streams, link,
                                               options_.profile_repeats, options_.direct_access));
    }
  }

  if (options_.preload) {
    size_t next = 0;
    for (const ModelConfig& m : config.models) {
      ModelState& state = *models_.at(m.name);
      const uint64_t bytes = state.model->weight_bytes();
      for (size_t k = 0; k < device_states_.size(); ++k) {
        const size_t d = (next + k) % device_states_.size();
        DeviceState& device = *device_states_[d];
        if (device.used + bytes > device.capacity) continue;
        DeviceGuard device_guard(device.device);
        state.block = bind_whole_image(state.model->image(), device.streams);
        state.device = d;
        state.last_used = ++tick_;
        device.used += bytes;
        next = d + 1;
        break;
      }
    }
  }
}

SwitchingHandler::~SwitchingHandler() {
  std::lock_guard lock(mutex_);
  for (auto& [name, state] : models_) {
    if (!state->device) continue;
    device_states_[*state->device]->streams.compute.synchronize();
    switch_out(state->model->image());
    state->block = Tensor();
  }
}

std::vector<std::string> SwitchingHandler::model_names() const {
  std::vector<std::string> names;
  for (const auto& [name, state] : models_) names.push_back(name);
  return names;
}

const ServedModel& SwitchingHandler::served_model(const std::string& name) const {
  return *find(name).model;
}

SwitchingHandler::ModelState& SwitchingHandler::find(const std::string& model) const {
  auto it = models_.find(model);
  if (it == models_.end()) raise_unknown_model(model, model_names());
  return *it->second;
}

size_t SwitchingHandler::device_index(Device device) const {
  for (size_t d = 0; d < devices_.size(); ++d) {
    if (devices_[d] == device) return d;
  }
  FERRY_FAIL_AS(Error, "SwitchingHandler: ", device, " is not one of the served devices");
}

std::optional<Device> SwitchingHandler::resident_device(const std::string& model) const {
  const ModelState& state = find(model);
  std::lock_guard lock(mutex_);
  if (!state.device) return std::nullopt;
  return devices_[*state.device];
}

std::vector<std::string> SwitchingHandler::resident_models(Device device) const {
  const size_t d = device_index(device);
  std::lock_guard lock(mutex_);
  std::vector<std::pair<uint64_t, std::string>> resident;
  for (const auto& [name, state] : models_) {
    if (state->device == d) resident.emplace_back(state->last_used, name);
  }
  std::sort(resident.begin(), resident.end());
  std::vector<std::string> names;
  for (auto& [tick, name] : resident) names.push_back(std::move(name));
  return names;
}

uint64_t SwitchingHandler::resident_capacity(Device device) const {
  return device_states_[device_index(device)]->capacity;
}

uint64_t SwitchingHandler::weight_bytes(const std::string& model) const {
  return find(model).model->weight_bytes();
}

Grouping SwitchingHandler::grouping(const std::string& model, Device device) const {
  return find(model).plans.at(device_index(device)).grouping;
}

uint64_t SwitchingHandler::switch_count() const {
  std::lock_guard lock(mutex_);
  return switch_count_;
}

std::optional<size_t> SwitchingHandler::choose_device_locked(const ModelState& model) const {
  const uint64_t bytes = model.model->weight_bytes();
  std::optional<size_t> best;
  uint64_t best_key = UINT64_MAX;
  for (size_t d = 0; d < device_states_.size(); ++d) {
    const DeviceState& device = *device_states_[d];
    if (device.busy || bytes > device.capacity) continue;
    // 0 when the model fits as things are; else 1 + the last use of the device's LRU model.
    uint64_t key = 0;
    if (device.used + bytes > device.capacity) {
      uint64_t oldest = UINT64_MAX;
      for (const auto& [name, state] : models_) {
        if (state->device == d) oldest = std::min(oldest, state->last_used);
      }
      key = oldest == UINT64_MAX ? UINT64_MAX - 1 : oldest + 1;
    }
    if (!best || key < best_key) {
      best = d;
      best_key = key;
    }
  }
  return best;
}

std::vector<std::string> SwitchingHandler::make_room_locked(size_t d, uint64_t bytes) {
  DeviceState& device = *device_states_[d];
  std::vector<std::string> evicted;
  while (device.used + bytes > device.capacity) {
    ModelState* victim = nullptr;
    std::string victim_name;
    for (auto& [name, state] : models_) {
      if (state->device != d || state->running > 0) continue;
      if (victim == nullptr || state->last_used < victim->last_used) {
        victim = state.get();
        victim_name = name;
      }
    }
    FERRY_CHECK(victim != nullptr, "SwitchingHandler: expected a model to evict from ",
                device.device, " (", device.used, " of ", device.capacity,
                " bytes used), but every resident model is running");
    switch_out(victim->model->image());
    victim->block = Tensor();
    victim->device.reset();
    device.used -= victim->model->weight_bytes();
    evicted.push_back(victim_name);
  }
  return evicted;
}

void SwitchingHandler::release_device(ModelState& model, size_t d, const Tensor* new_block) {
  {
    std::lock_guard lock(mutex_);
    DeviceState& device = *device_states_[d];
    if (new_block != nullptr) model.block = *new_block;
    model.running -= 1;
    model.last_used = ++tick_;
    device.busy = false;
  }
  device_freed_.notify_all();
}

InferResult SwitchingHandler::handle(const InferRequest& request) {
  ModelState& state = find(request.model);
  ServedModel& model = *state.model;
  std::vector<Tensor> inputs = model.match_inputs(request.inputs);
  model.check_values(inputs);

  InferResult result;
  const auto t0 = HandlerClock::now();
  const bool has_deadline =
      request.deadline_ms != 0 && request.received != HandlerClock::time_point{};
  const auto deadline = request.received + std::chrono::milliseconds(request.deadline_ms);
  size_t d = 0;
  bool switching = false;
  std::vector<std::string> evicted;
  {
    std::unique_lock lock(mutex_);
    while (true) {
      const auto now = HandlerClock::now();
      if (has_deadline && now > deadline) {
        raise_deadline_before_start(request, now);
      }
      std::optional<size_t> chosen;
      if (state.device) {
        if (!device_states_[*state.device]->busy) chosen = state.device;
      } else {
        chosen = choose_device_locked(state);
      }
      if (chosen) {
        d = *chosen;
        break;
      }
      if (has_deadline) {
        device_freed_.wait_until(lock, deadline);
      } else {
        device_freed_.wait(lock);
      }
    }
    DeviceState& device = *device_states_[d];
    if (!state.device) {
      // Before anything is marked: if no room can be made, nothing is left half done.
      evicted = make_room_locked(d, model.weight_bytes());
      switching = true;
      state.device = d;
      device.used += model.weight_bytes();
      switch_count_ += 1;
    }
    device.busy = true;
    state.running += 1;
  }
  const auto t1 = HandlerClock::now();
  result.timings.queue_ms = ms_between(t0, t1);

  DeviceState& device = *device_states_[d];
  Tensor new_block;
  try {
    if (options_.before_run) options_.before_run(request.model);
    DeviceRun run = run_on_device(model, std::move(inputs), device.streams,
                                  switching ? &state.plans[d] : nullptr);
    new_block = run.block;
    result.timings.transfer_ms = run.timings.transfer_ms;
    result.timings.compute_ms = run.timings.compute_ms;
    result.outputs = std::move(run.outputs);
    if (switching && options_.on_switch) {
      options_.on_switch(SwitchEvent{request.model, device.device,
                                     state.plans[d].grouping.ends.size(), evicted, run.switch_ms});
    }
  } catch (...) {
    if (switching) {
      // run_on_device put the weights back in the image: the model is not resident.
      std::lock_guard lock(mutex_);
      state.block = Tensor();
      state.device.reset();
      device.used -= model.weight_bytes();
    }
    release_device(state, d, nullptr);
    throw;
  }
  release_device(state, d, switching ? &new_block : nullptr);
  return result;
}

}  // namespace ferry::switch_
