// The serve controller over worker processes (worker_pool.h).
#include "ferry/switch/worker_pool.h"

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "ferry/core/error.h"
#include "ferry/device/backend.h"
#include "ferry/device/ipc.h"
#include "ferry/device/runtime.h"
#include "ferry/memory/caching_allocator.h"
#include "ferry/memory/shared_host_buffer.h"
#include "ferry/ops/factories.h"
#include "ferry/switch/device_run.h"
#include "ferry/switch/protocol.h"
#include "ferry/switch/serve_worker.h"
#include "ferry/switch/served_model.h"
#include "ferry/switch/switch_profile.h"
#include "ferry/switch/worker_channel.h"

extern char** environ;

namespace ferry::switch_ {
namespace {

using PoolClock = std::chrono::steady_clock;
constexpr uint64_t kPoolAlign = 512;

uint64_t pool_align_down(uint64_t n) { return n / kPoolAlign * kPoolAlign; }
uint64_t pool_align_up(uint64_t n) { return (n + kPoolAlign - 1) / kPoolAlign * kPoolAlign; }

std::string worker_exit_text(int status) {
  if (WIFSIGNALED(status)) return detail::str_cat("was killed by signal ", WTERMSIG(status));
  if (WIFEXITED(status)) return detail::str_cat("exited with status ", WEXITSTATUS(status));
  return "ended";
}

// Kills `pid` and reaps it; returns how it ended.
std::string kill_and_reap(pid_t pid) {
  if (pid <= 0) return "was not running";
  ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return "could not be reaped";
  }
  return worker_exit_text(status);
}

// Starts `program switch-worker` with `channel` as its descriptor 3 and this process's
// environment with `overrides` over it.
pid_t spawn_worker(const std::string& program, int channel,
                   const std::map<std::string, std::string>& overrides) {
  const std::string parent = std::to_string(::getpid());
  std::vector<std::string> args = {program, "switch-worker", "--channel-fd",
                                   "3",     "--parent",      parent};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    if (!overrides.contains(entry.substr(0, entry.find('=')))) env.push_back(entry);
  }
  for (const auto& [key, value] : overrides) env.push_back(key + "=" + value);
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, channel, 3);
  pid_t pid = 0;
  const int err = ::posix_spawn(&pid, program.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0) {
    FERRY_FAIL_AS(Error, "ferry serve: could not start the worker program \"", program,
                  "\": ", std::strerror(err));
  }
  return pid;
}

std::string pool_mib(uint64_t bytes) {
  return detail::str_cat(bytes, " bytes (", static_cast<double>(bytes) / (1 << 20), " MiB)");
}

}  // namespace

std::string this_executable() {
  std::string path(4096, '\0');
  const ssize_t n = ::readlink("/proc/self/exe", path.data(), path.size());
  FERRY_CHECK(n > 0 && static_cast<size_t>(n) < path.size(),
              "could not read /proc/self/exe: ", std::strerror(errno));
  path.resize(static_cast<size_t>(n));
  return path;
}

struct WorkerPoolHandler::Model {
  std::string name;
  std::unique_ptr<ServedModel> model;
  std::shared_ptr<memory::SharedHostBuffer> weights;
  std::vector<DirectPlan> plans;  // per device
  Worker* resident = nullptr;
  uint64_t last_used = 0;
  uint64_t params_bytes() const {
    return std::max(kPoolAlign, pool_align_up(model->weight_bytes()));
  }
};

struct WorkerPoolHandler::Worker {
  enum class State { kStarting, kReady, kDead };
  size_t device = 0;
  size_t slot = 0;
  pid_t pid = 0;
  IpcConnection channel;
  State state = State::kStarting;
  Model* model = nullptr;
  uint64_t params_offset = 0, params_size = 0;
  std::string death;                   // how it ended, once dead
  PoolClock::time_point restart_at{};  // after a failed restart, the next try
};

struct WorkerPoolHandler::DeviceSlot {
  Device device;
  void* region = nullptr;
  uint64_t region_bytes = 0;
  uint64_t params_end = 0;  // the parameters area is [0, params_end)
  uint64_t workspace_bytes = 0;
  std::vector<std::unique_ptr<Worker>> workers;
  bool busy = false;
  // The run in flight: its preemption token (0: not preemptible) and its worker's pid.
  int running_token = 0;
  pid_t running_pid = 0;
  // A model whose request preempted this device's run: the device is kept for it.
  Model* reserved_by = nullptr;

  std::string worker_name(size_t slot, pid_t pid) const {
    return detail::str_cat("worker ", slot, " of ", device.str(), " (pid ", pid, ")");
  }
  std::string worker_name(const Worker& w) const { return worker_name(w.slot, w.pid); }
  // The lowest offset of the parameters area where `bytes` fit between the workers' ranges.
  std::optional<uint64_t> find_range(uint64_t bytes) const {
    std::vector<std::pair<uint64_t, uint64_t>> used;
    for (const auto& w : workers) {
      if (w->params_size > 0) used.emplace_back(w->params_offset, w->params_size);
    }
    std::sort(used.begin(), used.end());
    uint64_t cursor = 0;
    for (const auto& [offset, size] : used) {
      if (offset >= cursor + bytes) return cursor;
      cursor = std::max(cursor, offset + size);
    }
    if (params_end >= cursor + bytes) return cursor;
    return std::nullopt;
  }
};

WorkerPoolHandler::WorkerPoolHandler(const ServeConfig& config, std::vector<Device> devices,
                                     WorkerPoolOptions options)
    : options_(std::move(options)), devices_(std::move(devices)) {
  check_serving_setup(config, devices_);
  FERRY_CHECK(!options_.worker_program.empty(),
              "WorkerPoolHandler: expected the path of the ferry executable, got none");
  models_toml_ = to_models_toml(config, /*with_weights=*/false);

  // Models, their plans per device (profiled here, before the regions take the memory), and
  // their weights moved into shared pinned memory.
  for (const ModelConfig& m : config.models) {
    auto model = std::make_unique<Model>();
    model->name = m.name;
    model->model = options_.load_model ? options_.load_model(m, options_.profile_shape)
                                       : std::make_unique<ServedModel>(m, options_.profile_shape);
    models_.emplace(m.name, std::move(model));
  }
  for (Device device : devices_) {
    const SwitchStreams streams = switch_streams(device);
    const LinkProfile link = measure_link(device, options_.profile_repeats);
    for (auto& [name, model] : models_) {
      model->plans.push_back(plan_switch(*model->model, streams, link, options_.profile_repeats,
                                         options_.direct_access));
    }
    memory::empty_cache(device);
  }
  for (auto& [name, model] : models_) {
    const uint64_t nbytes = model->model->weight_bytes();
    if (nbytes == 0) continue;
    model->weights = std::make_shared<memory::SharedHostBuffer>(nbytes, "ferry-weights-" + name);
    auto keep = model->weights;
    model->model->image().relocate_host(from_blob(
        keep->data(), {static_cast<int64_t>(nbytes)}, {1}, [keep](void*) mutable { keep.reset(); },
        TensorOptions().dtype(kUInt8)));
  }

  // Regions: the workers' workspaces at the top, the parameters area below them.
  const size_t per_device = 1 + options_.standby;
  for (Device device : devices_) {
    auto slot = std::make_unique<DeviceSlot>();
    slot->device = device;
    const uint64_t free = memory_info(device).free;
    const uint64_t available = free > kRegionMargin ? free - kRegionMargin : 0;
    slot->params_end =
        pool_align_down(options_.resident_bytes != 0 ? options_.resident_bytes : available / 2);
    const uint64_t rest = available > slot->params_end ? available - slot->params_end : 0;
    slot->workspace_bytes = pool_align_down(options_.workspace_bytes != 0 ? options_.workspace_bytes
                                                                          : rest / per_device);
    slot->region_bytes = slot->params_end + per_device * slot->workspace_bytes;
    if (slot->params_end == 0 || slot->workspace_bytes == 0 || slot->region_bytes > free) {
      throw ConfigError(detail::str_cat(
          "ferry serve: expected a parameters area and ", per_device, " workspaces that fit in ",
          device.str(), "'s ", pool_mib(free), " of free memory, but got ",
          pool_mib(slot->params_end), " and ", per_device, " x ", pool_mib(slot->workspace_bytes),
          " (see --resident-bytes and --workspace-bytes)"));
    }
    slot->region = get_backend(device.type()).malloc(device.index(), slot->region_bytes);
    device_slots_.push_back(std::move(slot));
  }
  for (auto& [name, model] : models_) {
    bool fits = false;
    std::string areas;
    for (const auto& slot : device_slots_) {
      fits = fits || model->params_bytes() <= slot->params_end;
      areas += detail::str_cat(areas.empty() ? "" : ", ", slot->device.str(), ": ",
                               pool_mib(slot->params_end));
    }
    if (!fits) {
      throw SwitchError(
          ErrorCode::too_large,
          detail::str_cat("model '", name, "' needs ", pool_mib(model->params_bytes()),
                          " of device memory for its weights, but the parameters "
                          "area is ",
                          areas, " (see --resident-bytes and --workspace-bytes)"));
    }
  }

  // Workers: all launched, then all awaited, so that they warm up side by side.
  for (size_t d = 0; d < device_slots_.size(); ++d) {
    for (size_t k = 0; k < per_device; ++k) {
      auto worker = std::make_unique<Worker>();
      worker->device = d;
      worker->slot = k;
      device_slots_[d]->workers.push_back(std::move(worker));
    }
  }
  std::vector<Worker*> all;
  for (auto& slot : device_slots_) {
    for (auto& w : slot->workers) all.push_back(w.get());
  }
  std::vector<StartingWorker> starting;
  try {
    for (Worker* w : all) starting.push_back(launch_worker(*w));
    for (size_t i = 0; i < all.size(); ++i) {
      await_worker(*all[i], starting[i]);
      take_started(*all[i], starting[i]);
    }
  } catch (...) {
    for (const StartingWorker& w : starting) kill_and_reap(w.pid);
    for (Worker* w : all) kill_and_reap(w->pid);
    for (auto& slot : device_slots_) {
      get_backend(slot->device.type()).free(slot->device.index(), slot->region);
    }
    throw;
  }
  monitor_ = std::thread([this] { monitor_loop(); });
}

WorkerPoolHandler::~WorkerPoolHandler() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  monitor_wake_.notify_all();
  if (monitor_.joinable()) monitor_.join();
  std::vector<Worker*> live;
  for (auto& slot : device_slots_) {
    for (auto& w : slot->workers) {
      if (w->state != Worker::State::kReady) continue;
      try {
        WorkerMessage stop;
        stop.op = WorkerOp::kShutdown;
        send_worker_message(w->channel, stop);
      } catch (const Error&) {
        // It is gone already; reaped below.
      }
      live.push_back(w.get());
    }
  }
  const auto deadline = PoolClock::now() + std::chrono::seconds(5);
  for (Worker* w : live) {
    int status = 0;
    while (PoolClock::now() < deadline && ::waitpid(w->pid, &status, WNOHANG) == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (::waitpid(w->pid, &status, WNOHANG) == 0) kill_and_reap(w->pid);
  }
  for (auto& slot : device_slots_) {
    get_backend(slot->device.type()).free(slot->device.index(), slot->region);
  }
}

WorkerPoolHandler::StartingWorker WorkerPoolHandler::launch_worker(const Worker& worker) const {
  const DeviceSlot& slot = *device_slots_[worker.device];
  auto [mine, theirs] = IpcConnection::pair();
  StartingWorker starting;
  starting.pid = spawn_worker(options_.worker_program, theirs.fd(), options_.worker_environment);
  theirs.close();
  starting.channel = std::move(mine);
  starting.channel.set_timeout(options_.worker_start_timeout);
  WorkerInit init;
  init.models_toml = models_toml_;
  init.region = export_ipc_handle(slot.device, slot.region, slot.region_bytes);
  init.workspace_offset = slot.params_end + worker.slot * slot.workspace_bytes;
  init.workspace_size = slot.workspace_bytes;
  for (const auto& [name, model] : models_) {
    WorkerModelImage image;
    image.name = name;
    image.nbytes = model->model->weight_bytes();
    image.fingerprint = model->model->image().fingerprint();
    if (model->weights) image.weights = model->weights->export_handle();
    init.images.push_back(std::move(image));
  }
  try {
    send_worker_init(starting.channel, init);
  } catch (const Error& e) {
    kill_and_reap(starting.pid);
    throw Error(detail::str_cat("ferry serve: ", slot.worker_name(worker.slot, starting.pid),
                                " did not start (running \"", options_.worker_program,
                                " switch-worker\"): ", e.what()));
  }
  return starting;
}

void WorkerPoolHandler::await_worker(const Worker& worker, StartingWorker& starting) const {
  const DeviceSlot& slot = *device_slots_[worker.device];
  const std::string name = slot.worker_name(worker.slot, starting.pid);
  WorkerMessage ready;
  try {
    ready = receive_worker_message(starting.channel);
  } catch (const Error& e) {
    throw Error(detail::str_cat("ferry serve: ", name, " did not start: ", e.what()));
  }
  if (ready.op != WorkerOp::kReady) {
    throw Error(detail::str_cat(
        "ferry serve: ", name, " did not start: ",
        ready.op == WorkerOp::kFailed ? ready.text : std::string("unexpected message")));
  }
  starting.channel.set_timeout(options_.reply_timeout);
}

void WorkerPoolHandler::take_started(Worker& worker, StartingWorker& starting) {
  worker.pid = std::exchange(starting.pid, 0);
  worker.channel = std::move(starting.channel);
  worker.state = Worker::State::kReady;
}

std::vector<std::string> WorkerPoolHandler::model_names() const {
  std::vector<std::string> names;
  for (const auto& [name, model] : models_) names.push_back(name);
  return names;
}

std::vector<WorkerInfo> WorkerPoolHandler::workers() const {
  std::lock_guard lock(mutex_);
  std::vector<WorkerInfo> out;
  for (const auto& slot : device_slots_) {
    for (const auto& w : slot->workers) {
      out.push_back(WorkerInfo{
          slot->device, w->slot, w->state == Worker::State::kReady ? w->pid : 0,
          w->model != nullptr ? w->model->name : std::string(), w->params_offset, w->params_size});
    }
  }
  return out;
}

uint64_t WorkerPoolHandler::params_capacity(Device device) const {
  for (const auto& slot : device_slots_) {
    if (slot->device == device) return slot->params_end;
  }
  FERRY_FAIL_AS(Error, "WorkerPoolHandler: ", device, " is not one of the served devices");
}

uint64_t WorkerPoolHandler::weight_bytes(const std::string& model) const {
  return find(model).model->weight_bytes();
}

std::optional<Device> WorkerPoolHandler::resident_device(const std::string& model) const {
  const Model& m = find(model);
  std::lock_guard lock(mutex_);
  if (m.resident == nullptr) return std::nullopt;
  return device_slots_[m.resident->device]->device;
}

uint64_t WorkerPoolHandler::switch_count() const {
  std::lock_guard lock(mutex_);
  return switch_count_;
}

uint64_t WorkerPoolHandler::preemption_count() const {
  std::lock_guard lock(mutex_);
  return preemption_count_;
}

uint64_t WorkerPoolHandler::restart_count() const {
  std::lock_guard lock(mutex_);
  return restart_count_;
}

const ServedModel& WorkerPoolHandler::served_model(const std::string& name) const {
  return *find(name).model;
}

WorkerPoolHandler::Model& WorkerPoolHandler::find(const std::string& model) const {
  auto it = models_.find(model);
  if (it == models_.end()) raise_unknown_model(model, model_names());
  return *it->second;
}

std::optional<size_t> WorkerPoolHandler::choose_device_locked(const Model& model) const {
  std::optional<size_t> best;
  uint64_t best_key = UINT64_MAX;
  for (size_t d = 0; d < device_slots_.size(); ++d) {
    const DeviceSlot& slot = *device_slots_[d];
    if (slot.busy || model.params_bytes() > slot.params_end) continue;
    bool idle_worker = false, any_ready = false;
    uint64_t oldest = UINT64_MAX;
    for (const auto& w : slot.workers) {
      if (w->state != Worker::State::kReady) continue;
      any_ready = true;
      if (w->model == nullptr) {
        idle_worker = true;
      } else {
        oldest = std::min(oldest, w->model->last_used);
      }
    }
    if (!any_ready) continue;
    // 0 when a worker is free and the weights fit as things are; else 1 + the oldest use.
    const bool fits = idle_worker && slot.find_range(model.params_bytes()).has_value();
    const uint64_t key = fits ? 0 : (oldest == UINT64_MAX ? UINT64_MAX - 1 : oldest + 1);
    if (!best || key < best_key) {
      best = d;
      best_key = key;
    }
  }
  return best;
}

std::string WorkerPoolHandler::bury_locked(Worker& worker, const std::string& doing) {
  if (worker.state == Worker::State::kDead) return worker.death;
  DeviceSlot& slot = *device_slots_[worker.device];
  const std::string name = slot.worker_name(worker);
  worker.death = kill_and_reap(worker.pid);
  worker.state = Worker::State::kDead;
  worker.channel.close();
  if (worker.model != nullptr) worker.model->resident = nullptr;
  worker.model = nullptr;
  worker.params_offset = worker.params_size = 0;
  if (options_.log) options_.log(detail::str_cat(name, " ", worker.death, " ", doing));
  monitor_wake_.notify_all();
  return worker.death;
}

void WorkerPoolHandler::evict(std::unique_lock<std::mutex>& lock, Worker& worker) {
  Model* model = worker.model;
  if (model == nullptr) return;
  model->resident = nullptr;
  lock.unlock();
  std::optional<std::string> failure;
  try {
    WorkerMessage evict;
    evict.op = WorkerOp::kEvict;
    send_worker_message(worker.channel, evict);
    const WorkerMessage done = receive_worker_message(worker.channel);
    if (done.op != WorkerOp::kEvicted) failure = "answered an eviction with another message";
  } catch (const Error& e) {
    failure = e.what();
  }
  lock.lock();
  if (failure) {
    bury_locked(worker, "while evicting model '" + model->name + "': " + *failure);
    return;
  }
  worker.model = nullptr;
  worker.params_offset = worker.params_size = 0;
}

WorkerPoolHandler::Worker& WorkerPoolHandler::prepare_switch(std::unique_lock<std::mutex>& lock,
                                                             size_t d, Model& model,
                                                             std::vector<std::string>& evicted) {
  DeviceSlot& slot = *device_slots_[d];
  const auto least_recent = [&](const Worker* except) {
    Worker* victim = nullptr;
    for (auto& w : slot.workers) {
      if (w.get() == except || w->state != Worker::State::kReady || w->model == nullptr) continue;
      if (victim == nullptr || w->model->last_used < victim->model->last_used) victim = w.get();
    }
    return victim;
  };
  Worker* chosen = nullptr;
  for (auto& w : slot.workers) {
    if (w->state == Worker::State::kReady && w->model == nullptr) chosen = w.get();
  }
  if (chosen == nullptr) {
    chosen = least_recent(nullptr);
    FERRY_CHECK(chosen != nullptr, "WorkerPoolHandler: expected a ready worker on ", slot.device);
    evicted.push_back(chosen->model->name);
    evict(lock, *chosen);
    if (chosen->state != Worker::State::kReady) {
      throw SwitchError(ErrorCode::internal,
                        detail::str_cat(slot.worker_name(*chosen), " ", chosen->death,
                                        " while evicting a model; a new worker is starting"));
    }
  }
  std::optional<uint64_t> offset;
  while (!(offset = slot.find_range(model.params_bytes()))) {
    Worker* victim = least_recent(chosen);
    FERRY_CHECK(victim != nullptr, "WorkerPoolHandler: expected a model to evict from ",
                slot.device, " to fit ", model.params_bytes(), " bytes, but none is left");
    evicted.push_back(victim->model->name);
    evict(lock, *victim);
  }
  chosen->params_offset = *offset;
  chosen->params_size = model.params_bytes();
  return *chosen;
}

bool WorkerPoolHandler::preempt_for_locked(Model& model) {
  for (auto& slot : device_slots_) {
    if (!slot->busy || slot->running_token == 0 || slot->reserved_by != nullptr ||
        model.params_bytes() > slot->params_end) {
      continue;
    }
    sigval value{};
    value.sival_int = slot->running_token;
    if (::sigqueue(slot->running_pid, kPreemptSignal, value) != 0) continue;
    slot->reserved_by = &model;
    slot->running_token = 0;  // one signal per run
    return true;
  }
  return false;
}

InferResult WorkerPoolHandler::handle(const InferRequest& request) {
  Model& model = find(request.model);
  model.model->check_values(model.model->match_inputs(request.inputs));

  const auto t0 = PoolClock::now();
  const bool has_deadline = request.deadline_ms != 0 && request.received != PoolClock::time_point{};
  const auto deadline = request.received + std::chrono::milliseconds(request.deadline_ms);
  const auto free_for_us = [&](const DeviceSlot& slot) {
    return !slot.busy && (slot.reserved_by == nullptr || slot.reserved_by == &model);
  };
  std::unique_lock lock(mutex_);
  bool preemptible = options_.preempt;  // a run that was preempted once runs to its end
  while (true) {
    size_t d = 0;
    while (true) {
      const auto now = PoolClock::now();
      if (has_deadline && now > deadline) {
        for (auto& slot : device_slots_) {
          if (slot->reserved_by == &model) slot->reserved_by = nullptr;
        }
        device_freed_.notify_all();
        raise_deadline_before_start(request, now);
      }
      std::optional<size_t> chosen;
      if (model.resident != nullptr) {
        if (free_for_us(*device_slots_[model.resident->device])) chosen = model.resident->device;
      } else {
        chosen = choose_device_locked(model);
        if (!chosen && options_.preempt) {
          bool reserved = false;
          for (const auto& slot : device_slots_) reserved = reserved || slot->reserved_by == &model;
          if (!reserved) preempt_for_locked(model);
        }
      }
      if (chosen) {
        d = *chosen;
        break;
      }
      if (has_deadline) {
        device_freed_.wait_until(lock, std::min(deadline, now + std::chrono::milliseconds(200)));
      } else {
        device_freed_.wait_for(lock, std::chrono::milliseconds(200));
      }
    }
    for (auto& slot : device_slots_) {
      if (slot->reserved_by == &model) slot->reserved_by = nullptr;
    }
    DeviceSlot& slot = *device_slots_[d];
    slot.busy = true;
    const auto release = [&] {
      slot.busy = false;
      slot.running_token = 0;
      device_freed_.notify_all();
    };
    Worker* worker = model.resident;
    const bool switching = worker == nullptr;
    std::vector<std::string> evicted;
    try {
      if (switching) {
        worker = &prepare_switch(lock, d, model, evicted);
        worker->model = &model;
        model.resident = worker;
        switch_count_ += 1;
      }
    } catch (...) {
      release();
      throw;
    }
    const pid_t pid = worker->pid;
    const std::string worker_name = slot.worker_name(*worker);
    const int token = preemptible && !switching ? next_token_++ : 0;
    if (next_token_ == INT32_MAX) next_token_ = 1;
    slot.running_token = token;
    slot.running_pid = pid;
    const auto t1 = PoolClock::now();
    lock.unlock();

    WorkerMessage message;
    message.op = WorkerOp::kInfer;
    message.value = static_cast<uint64_t>(token);
    message.payload = encode_infer_request(request);
    if (switching) {
      message.params_offset = worker->params_offset;
      message.params_size = worker->params_size;
      for (size_t end : model.plans[d].grouping.ends) message.group_ends.push_back(end);
      for (bool direct : model.plans[d].direct) message.direct.push_back(direct ? 1 : 0);
    }
    WorkerMessage reply;
    std::optional<std::string> failure;
    try {
      send_worker_message(worker->channel, message);
      if (options_.after_send) options_.after_send(pid);
      reply = receive_worker_message(worker->channel);
      if (reply.op != WorkerOp::kReply) failure = "answered a request with another message";
    } catch (const Error& e) {
      failure = e.what();
    }
    lock.lock();
    if (failure) {
      const std::string doing =
          detail::str_cat("while running model '", request.model, "'",
                          switching ? " (switching it in)" : "", ": ", *failure);
      const std::string how = bury_locked(*worker, doing);
      release();
      throw SwitchError(ErrorCode::internal,
                        detail::str_cat(worker_name, " ", how, " ", doing,
                                        "; a new worker is starting in its place"));
    }
    DecodedFrame frame;
    try {
      frame = decode_frame(reply.payload);
    } catch (const Error& e) {
      bury_locked(*worker, std::string("after a reply that is not a frame: ") + e.what());
      release();
      throw SwitchError(
          ErrorCode::internal,
          detail::str_cat(worker_name, " sent a reply that is not a frame: ", e.what()));
    }
    model.last_used = ++tick_;
    if (frame.header.type == MessageType::error_response) {
      if (switching) {  // the worker dropped the sub-region: the model is not resident
        worker->model = nullptr;
        worker->params_offset = worker->params_size = 0;
        model.resident = nullptr;
      }
      release();
      if (frame.error.code == ErrorCode::preempted && token != 0) {
        preemption_count_ += 1;
        preemptible = false;
        if (options_.log) {
          options_.log(detail::str_cat("preempted model '", request.model, "' on ",
                                       slot.device.str(), ": ", frame.error.message,
                                       "; it runs again"));
        }
        continue;  // back to the queue, still holding the lock
      }
      throw SwitchError(frame.error.code, frame.error.message);
    }
    release();
    lock.unlock();
    InferResult result = std::move(frame.response);
    result.timings.queue_ms = ms_between(t0, t1);
    if (switching && options_.on_switch) {
      options_.on_switch(SwitchEvent{request.model, slot.device,
                                     model.plans[d].grouping.ends.size(), evicted,
                                     result.timings.transfer_ms + result.timings.compute_ms});
    }
    return result;
  }
}

void WorkerPoolHandler::monitor_loop() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    // A worker that is idle has nothing to say: a readable or hung-up channel means it is gone.
    for (auto& slot : device_slots_) {
      if (slot->busy) continue;
      for (auto& w : slot->workers) {
        if (w->state != Worker::State::kReady) continue;
        pollfd p{w->channel.fd(), POLLIN, 0};
        if (::poll(&p, 1, 0) > 0) bury_locked(*w, "while idle");
      }
    }
    for (auto& slot : device_slots_) {
      for (auto& w : slot->workers) {
        if (w->state != Worker::State::kDead || stopping_ || PoolClock::now() < w->restart_at) {
          continue;
        }
        w->state = Worker::State::kStarting;
        w->pid = 0;
        lock.unlock();
        std::optional<std::string> failure;
        StartingWorker starting;
        try {
          starting = launch_worker(*w);
          await_worker(*w, starting);
        } catch (const Error& e) {
          failure = e.what();
        }
        lock.lock();
        if (failure) {
          w->death = kill_and_reap(starting.pid);
          w->state = Worker::State::kDead;
          w->restart_at = PoolClock::now() + std::chrono::seconds(1);
          if (options_.log) options_.log("could not restart a worker: " + *failure);
        } else {
          take_started(*w, starting);
          restart_count_ += 1;
          if (options_.log) {
            options_.log(detail::str_cat("started ", slot->worker_name(*w), " in its place"));
          }
          device_freed_.notify_all();
        }
      }
    }
    monitor_wake_.wait_for(lock, std::chrono::milliseconds(100));
  }
}

}  // namespace ferry::switch_
