// SwitchingHandler: the RequestHandler behind `ferry serve`. It keeps a resident-model cache per
// device and switches models in, pipelined, when a request needs one that is not resident.
//
// - Every configured model is built once (ServedModel); its weights live in one pinned host
//   ModelImage. A model is resident on a device while its image is bound to a device block
//   there; it is resident on at most one device at a time.
// - Each device has a capacity for resident weights (SwitchingOptions::resident_bytes, default a
//   fraction of the device's free memory at startup). A model larger than every device's
//   capacity is refused at construction with a SwitchError naming the sizes.
// - At construction each (model, device) pair is profiled once (profile_layers on an example
//   input, measure_link per device) and its optimal grouping (group_optimally) cached; no request
//   ever profiles. Then models are made resident in configuration order, round-robin, while they
//   fit without evicting anything.
// - One request runs on a device at a time. A request for a resident model waits for its device.
//   Otherwise it takes a device that runs nothing: one with room for the model first, else the
//   one whose least-recently-used model is oldest; there it evicts least-recently-used models
//   until the model fits and switches it in with switch_in, the first request computing while
//   the later groups are still being copied. Only models on the device the request holds are
//   evicted, so a model running a request is never evicted. Requests on different devices run
//   concurrently.
// - Timings: queue is the wait for a device; transfer is the input and output copies plus, for a
//   switched request, the time until the last group has arrived; compute is the rest.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ferry/core/device.h"
#include "ferry/switch/device_run.h"
#include "ferry/switch/grouping.h"
#include "ferry/switch/model_config.h"
#include "ferry/switch/pipelined_switch.h"
#include "ferry/switch/served_model.h"
#include "ferry/switch/types.h"

namespace ferry::switch_ {

// The fraction of a device's free memory (memory_info at startup) that resident weights may use
// when no capacity is given; the rest is left for activations and inputs.
inline constexpr double kDefaultResidentFraction = 0.8;

// One switch, as ferry serve logs it.
struct SwitchEvent {
  std::string model;
  Device device;
  size_t groups = 0;
  std::vector<std::string> evicted;  // least recently used first
  double ms = 0;                     // from the switch's start to the request's output
};

struct SwitchingOptions {
  // Bytes of resident weights per device; 0: kDefaultResidentFraction of its free memory.
  uint64_t resident_bytes = 0;
  // The example input each model is profiled on (BERT's sequence is capped at the model's
  // max_position_embeddings).
  ZooInputShape profile_shape{1, 224, 128};
  int profile_repeats = 3;
  // Which layers a switch may read in place from pinned host memory (device_run.h).
  DirectAccess direct_access = DirectAccess::kAuto;
  // How each model is built and its weights had (default: from its weights file or seed).
  ModelLoader load_model;
  // Make models resident at startup (round-robin, while they fit without eviction).
  bool preload = true;
  // Called after each switch, on the request's thread.
  std::function<void(const SwitchEvent&)> on_switch;
  // For tests: called on the request's thread once it holds its device (and before a switch),
  // with the model's name.
  std::function<void(const std::string&)> before_run;
};

class SwitchingHandler : public RequestHandler {
 public:
  // Raises ConfigError (no models, no devices), SwitchError(too_large) for a model no device can
  // hold, or the model loader's error.
  SwitchingHandler(const ServeConfig& config, std::vector<Device> devices,
                   SwitchingOptions options = {});
  ~SwitchingHandler() override;

  // unknown_model lists the served models; bad_input names expected and given inputs;
  // deadline_exceeded when the deadline passes before the request has a device.
  InferResult handle(const InferRequest& request) override;

  std::vector<std::string> model_names() const;
  // The model called `name` (unknown_model otherwise); its image's host bytes never change.
  const ServedModel& served_model(const std::string& name) const;
  const std::vector<Device>& devices() const { return devices_; }
  // Where the model is resident now, if anywhere; raises SwitchError(unknown_model).
  std::optional<Device> resident_device(const std::string& model) const;
  // The models resident on `device`, least recently used first.
  std::vector<std::string> resident_models(Device device) const;
  uint64_t resident_capacity(Device device) const;
  uint64_t weight_bytes(const std::string& model) const;
  // The cached grouping of `model` on `device`.
  Grouping grouping(const std::string& model, Device device) const;
  // Switches done since construction (preloads not counted).
  uint64_t switch_count() const;

 private:
  struct ModelState;
  struct DeviceState;
  ModelState& find(const std::string& model) const;
  size_t device_index(Device device) const;
  // Under mutex_: a device for a model that is not resident, or none while every candidate
  // runs a request.
  std::optional<size_t> choose_device_locked(const ModelState& model) const;
  // Under mutex_: evicts least-recently-used models from `device` until `bytes` fit.
  std::vector<std::string> make_room_locked(size_t device, uint64_t bytes);
  void release_device(ModelState& model, size_t device, const Tensor* new_block);

  SwitchingOptions options_;
  std::vector<Device> devices_;
  std::vector<std::unique_ptr<DeviceState>> device_states_;
  std::map<std::string, std::unique_ptr<ModelState>> models_;
  mutable std::mutex mutex_;
  std::condition_variable device_freed_;
  uint64_t tick_ = 0;
  uint64_t switch_count_ = 0;
};

// Raises ConfigError unless there are devices and models, each device is given once and none is
// the CPU: what every serving handler checks first.
void check_serving_setup(const ServeConfig& config, const std::vector<Device>& devices);

// "sim:0,sim:1" -> devices; raises ConfigError for an empty list or a bad name.
std::vector<Device> parse_device_list(const std::string& spec);

}  // namespace ferry::switch_
