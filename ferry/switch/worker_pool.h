// WorkerPoolHandler: the RequestHandler behind `ferry serve` when models run in worker processes,
// as PipeSwitch's controller does. Per device it allocates one region of device memory, exports it
// and starts 1 + `standby` worker processes (`ferry switch-worker`) that import and adopt it. The
// region is cut into one workspace sub-region per worker (activations) and a parameters area from
// which the controller hands each switched-in model a sub-region of its own. Each model's weights
// sit once in shared pinned host memory (a SharedHostBuffer every worker maps), so no worker
// holds a copy or reads a file on a switch.
//
// Policy, as the in-process SwitchingHandler's: a model is resident in at most one worker; each
// worker holds at most one model, so a device keeps up to 1 + standby models resident while their
// weights fit in its parameters area. One request runs on a device at a time. A request for a
// resident model goes to its worker; otherwise a device that runs nothing is chosen (one where the
// model fits as things are first, else the one whose least-recently-used model is oldest), a
// worker there is chosen (one without a model first, else the one whose model is least recently
// used, which is evicted), least-recently-used models are evicted until a contiguous range of the
// parameters area fits the model, and the worker switches it in while the request computes
// (groups planned by the controller, which profiles every (model, device) once at start-up).
//
// Faults: a worker that dies (kill -9 mid-request, mid-switch or idle), hangs past
// reply_timeout, or breaks the channel is killed and reaped; the request it held fails with
// SwitchError(internal) naming the worker, its pid and how it ended; its model is no longer
// resident and its parameters range is free again; a new worker is started in its slot. The
// destructor shuts every worker down (SIGKILL after a bounded wait) and reaps it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ferry/core/device.h"
#include "ferry/device/ipc.h"
#include "ferry/switch/device_run.h"
#include "ferry/switch/grouping.h"
#include "ferry/switch/model_config.h"
#include "ferry/switch/switching_handler.h"
#include "ferry/switch/types.h"
#include "ferry/switch/zoo_model.h"

namespace ferry::switch_ {

struct WorkerPoolOptions {
  // The ferry executable the workers run (`PROGRAM switch-worker ...`).
  std::string worker_program;
  // Set in the workers' environment over this process's own (e.g. a benchmark's FERRY_SIM_*).
  std::map<std::string, std::string> worker_environment;
  // Workers per device besides the active one.
  size_t standby = 2;
  // Each device's region holds a parameters area for resident weights and one workspace
  // sub-region per worker. Bytes of the parameters area; 0: half of the device's free memory at
  // start-up minus kRegionMargin.
  uint64_t resident_bytes = 0;
  // Bytes of each worker's workspace; 0: the rest of that free memory, shared among the workers.
  uint64_t workspace_bytes = 0;
  ZooInputShape profile_shape{1, 224, 128};
  int profile_repeats = 3;
  // How each model is built and its weights had (default: from its weights file or seed).
  ModelLoader load_model;
  // Which layers a switch may read in place from pinned host memory (device_run.h).
  DirectAccess direct_access = DirectAccess::kAuto;
  std::chrono::milliseconds worker_start_timeout{std::chrono::seconds(300)};
  // The longest a worker may take to answer a request or an eviction before it is killed.
  std::chrono::milliseconds reply_timeout{std::chrono::seconds(300)};
  // Preemption: a request for a model that is not resident, finding every device busy, stops
  // one device's run between two layers (kPreemptSignal to its worker) and has that device
  // next; the stopped request then runs again from the start, to its end this time. Only runs
  // of resident models are stopped, never a switch.
  bool preempt = false;
  // Called after each switch and for worker deaths, restarts and preemptions (a line of text).
  std::function<void(const SwitchEvent&)> on_switch;
  std::function<void(const std::string&)> log;
  // For tests: called with the worker's pid just after a request has been sent to it.
  std::function<void(pid_t)> after_send;
};

// The path of the running executable (/proc/self/exe): the worker program when this is ferry.
std::string this_executable();

// What the region leaves free on the device when no region size is given.
inline constexpr uint64_t kRegionMargin = uint64_t{256} << 20;

struct WorkerInfo {
  Device device;
  size_t slot = 0;
  pid_t pid = 0;      // 0 while (re)starting
  std::string model;  // resident model, or empty
  uint64_t params_offset = 0, params_size = 0;
};

class WorkerPoolHandler : public RequestHandler {
 public:
  // Loads the models, profiles them, allocates the regions and starts every worker, waiting until
  // each is ready. Raises ConfigError, SwitchError(too_large) for a model that fits no device's
  // parameters area, or ferry::Error when a worker cannot start (with its reason).
  WorkerPoolHandler(const ServeConfig& config, std::vector<Device> devices,
                    WorkerPoolOptions options);
  ~WorkerPoolHandler() override;

  InferResult handle(const InferRequest& request) override;

  std::vector<std::string> model_names() const;
  // The model called `name` (unknown_model otherwise); its image's host bytes (shared memory)
  // never change.
  const ServedModel& served_model(const std::string& name) const;
  const std::vector<Device>& devices() const { return devices_; }
  std::vector<WorkerInfo> workers() const;
  uint64_t params_capacity(Device device) const;
  uint64_t weight_bytes(const std::string& model) const;
  std::optional<Device> resident_device(const std::string& model) const;
  uint64_t switch_count() const;
  // Runs stopped between layers (and run again) since construction.
  uint64_t preemption_count() const;
  // Workers started since construction to replace dead ones.
  uint64_t restart_count() const;

 private:
  struct Model;
  struct Worker;
  struct DeviceSlot;

  Model& find(const std::string& model) const;
  std::optional<size_t> choose_device_locked(const Model& model) const;
  // On a device the caller holds: a worker and a parameters range for `model`, evicting as
  // needed (the channel work happens with the lock released).
  Worker& prepare_switch(std::unique_lock<std::mutex>& lock, size_t device, Model& model,
                         std::vector<std::string>& evicted);
  void evict(std::unique_lock<std::mutex>& lock, Worker& worker);
  // Under the lock: signals one busy device's preemptible run to stop and reserves the device
  // for `model`. False when no run can be stopped.
  bool preempt_for_locked(Model& model);
  // Marks `worker` dead (under the lock): its model is not resident, its range is free; the
  // monitor restarts the slot. Returns how it ended, for messages.
  std::string bury_locked(Worker& worker, const std::string& doing);
  // A worker process that has been started but is not in its slot yet: the slot's fields change
  // only under the lock (take_started), so others can read them meanwhile.
  struct StartingWorker {
    pid_t pid = 0;
    IpcConnection channel;
  };
  // Starts the process for `worker`'s slot and sends it its start-up message; then waits until
  // it is ready (raising ferry::Error with its reason); then puts it in the slot.
  StartingWorker launch_worker(const Worker& worker) const;
  void await_worker(const Worker& worker, StartingWorker& starting) const;
  void take_started(Worker& worker, StartingWorker& starting);
  void monitor_loop();

  WorkerPoolOptions options_;
  std::string models_toml_;
  std::vector<Device> devices_;
  std::vector<std::unique_ptr<DeviceSlot>> device_slots_;
  std::map<std::string, std::unique_ptr<Model>> models_;
  mutable std::mutex mutex_;
  std::condition_variable device_freed_;
  uint64_t tick_ = 0;
  uint64_t switch_count_ = 0;
  uint64_t restart_count_ = 0;
  uint64_t preemption_count_ = 0;
  int next_token_ = 1;
  bool stopping_ = false;
  std::condition_variable monitor_wake_;
  std::thread monitor_;
};

}  // namespace ferry::switch_
