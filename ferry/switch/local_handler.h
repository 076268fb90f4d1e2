// LocalHandler: a RequestHandler that serves model-zoo models in this process. Models come from
// a ServeConfig (models.toml), are built and loaded at construction and placed on the given
// devices round-robin. Each model runs one request at a time (a mutex per model; the wait is the
// queue time); inputs are checked against the model before anything runs; runs are no-grad in
// eval mode. Timings: queue (waiting for the model), transfer (inputs to the device, outputs
// back), compute (the forward, device synchronized).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ferry/core/device.h"
#include "ferry/switch/model_config.h"
#include "ferry/switch/served_model.h"
#include "ferry/switch/types.h"

namespace ferry::switch_ {

class LocalHandler : public RequestHandler {
 public:
  // Raises ConfigError (no models, no devices) or the model loader's error.
  LocalHandler(const ServeConfig& config, std::vector<Device> devices);

  // unknown_model lists the served models; bad_input names expected and given inputs;
  // deadline_exceeded when the deadline passes before the model is free.
  InferResult handle(const InferRequest& request) override;

  std::vector<std::string> model_names() const;
  // The model's device (for tests and logs); raises SwitchError(unknown_model).
  Device device_of(const std::string& model) const;

 private:
  struct Entry {
    std::unique_ptr<ServedModel> model;
    std::mutex mutex;
  };
  Entry& find(const std::string& model) const;

  std::map<std::string, std::unique_ptr<Entry>> models_;
};

// "sim:0,sim:1" -> devices; raises ConfigError for an empty list or a bad name.
std::vector<Device> parse_device_list(const std::string& spec);

}  // namespace ferry::switch_
