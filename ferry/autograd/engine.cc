// The backward engine: dependency counting, ready queues per device, engine threads, the
// stream handshakes between producer and consumer nodes, and the captures of autograd::grad.
#include "ferry/autograd/engine.h"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <queue>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "ferry/autograd/functions.h"
#include "ferry/autograd/grad_mode.h"
#include "ferry/autograd/gradient_shape.h"
#include "ferry/autograd/variable.h"
#include "ferry/core/error.h"
#include "ferry/device/event.h"
#include "ferry/device/guard.h"
#include "ferry/dispatch/local_dispatch_key_set.h"
#include "ferry/iter/parallel.h"
#include "ferry/ops/factories.h"

namespace ferry::autograd {
namespace {

// ---- the state of one backward call ---------------------------------------------------------

struct ExecInfo {
  bool needed = false;                                // apply() must run
  std::vector<std::pair<uint32_t, size_t>> captures;  // (input_nr, index into captured)
  bool should_execute() const { return needed || !captures.empty(); }
};

// A wait decided when a gradient arrived and queued when its consumer runs: `waiter` (the stream
// that will read the gradient) waits for `ready`, recorded on the producer's stream on arrival.
// Queued on the consumer's turn, the wait lands in the consumer thread's order of work on that
// stream. Queued from the producer's thread at arrival, it could land ahead of work the
// consumer's thread queues on the same stream before it gets to the consumer (in a pipeline, the
// next micro-batch's backward), holding that work back for a gradient it does not need.
struct PendingWait {
  Stream waiter;
  Event ready;
};

// The gradients arriving at one node, accumulated on the right stream, and the waits their
// consumer must queue before it runs.
struct InputBuffer {
  explicit InputBuffer(size_t n = 0) : grads(n) {}
  variable_list grads;
  std::vector<PendingWait> waits;

  void queue_waits() {
    for (PendingWait& w : waits) w.ready.block(w.waiter);
    waits.clear();
  }
};

// The streams a running backward function declared its cross-device gradients ready on
// (set_gradient_stream); null outside a backward function.
thread_local std::vector<Stream>* tls_gradient_streams = nullptr;

struct GraphTask {
  bool keep_graph = false;
  bool grad_mode = false;
  LocalDispatchKeySet key_set;
  std::unordered_map<Node*, int> dependencies;
  std::unordered_map<Node*, InputBuffer> not_ready;
  std::unordered_map<Node*, ExecInfo> exec_info;  // empty: run everything (backward)
  variable_list captured;
  std::vector<Stream> leaf_streams;
  // Keeps the graph's nodes alive while tasks name them by pointer.
  IntrusivePtr<Node> root;

  std::mutex mutex;  // guards dependencies, not_ready, captured, leaf_streams, error
  std::atomic<int> outstanding{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::condition_variable done_cv;
  bool done = false;
};

struct NodeTask {
  std::shared_ptr<GraphTask> graph;
  IntrusivePtr<Node> fn;
  InputBuffer inputs;
};

struct LaterFirst {
  bool operator()(const NodeTask& a, const NodeTask& b) const {
    return a.fn->sequence_nr() < b.fn->sequence_nr();
  }
};

// A queue of ready nodes; the node created last in the forward comes out first.
class ReadyQueue {
 public:
  void push(NodeTask task) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push(std::move(task));
    }
    cv_.notify_one();
  }
  // Blocks until a task is ready, or returns nullopt once `stop()` is true (checked on wake-ups).
  template <typename Stop>
  std::optional<NodeTask> pop(Stop stop) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return !queue_.empty() || stop(); });
    if (queue_.empty()) return std::nullopt;
    NodeTask t = std::move(const_cast<NodeTask&>(queue_.top()));
    queue_.pop();
    return t;
  }
  void wake() {
    std::lock_guard<std::mutex> lock(mutex_);
    cv_.notify_all();
  }
  bool empty() {
    std::lock_guard<std::mutex> lock(mutex_);
    return queue_.empty();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::priority_queue<NodeTask, std::vector<NodeTask>, LaterFirst> queue_;
};

// Engine threads run nested backwards inline (Note in engine.h).
thread_local int tls_engine_depth = 0;
// The queue the calling thread drains for its graph (CPU nodes; everything when nested).
thread_local ReadyQueue* tls_local_queue = nullptr;

class DeviceThreads {
 public:
  static DeviceThreads& get() {
    static auto* threads = new DeviceThreads();  // never destroyed: its threads never end
    return *threads;
  }
  ReadyQueue& queue_for(Device device) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = queues_.find(device);
    if (it != queues_.end()) return *it->second;
    auto queue = std::make_unique<ReadyQueue>();
    ReadyQueue* q = queue.get();
    queues_.emplace(device, std::move(queue));
    std::thread([q, device] { run(*q, device); }).detach();
    return *q;
  }
  int count() {
    std::lock_guard<std::mutex> lock(mutex_);
    return static_cast<int>(queues_.size());
  }

 private:
  static void run(ReadyQueue& queue, Device device);
  std::mutex mutex_;
  std::unordered_map<Device, std::unique_ptr<ReadyQueue>> queues_;
};

// ---- one node -----------------------------------------------------------------------------

void mark_done(GraphTask& g) {
  std::lock_guard<std::mutex> lock(g.mutex);
  g.done = true;
  g.done_cv.notify_all();
}

void push_ready(const std::shared_ptr<GraphTask>& graph, NodeTask task);

// Accumulates `grad` (produced on `producer`) into input `pos` of `consumer`'s buffer, on the
// stream PyTorch's rule picks, which waits for the stream the gradient is ready on: the
// producer's; for a gradient that crossed devices inside the producer, the stream the producer
// declared for its device (set_gradient_stream), else the device's default stream (which a plain
// copy made wait). The first gradient's wait is queued when the consumer runs; a sum runs now and
// waits now.
void accumulate_input(InputBuffer& buffer, uint32_t pos, Tensor grad,
                      const std::optional<Stream>& producer, const std::vector<Stream>& declared,
                      Node& consumer) {
  Tensor& slot = buffer.grads[pos];
  const Device device = grad.device();
  if (device.is_cpu()) {
    slot = slot.defined() ? slot + grad : std::move(grad);
    return;
  }
  Stream ready_on = default_stream(device);
  if (producer && producer->device() == device) {
    ready_on = *producer;
  } else {
    for (const Stream& s : declared) {
      if (s.device() == device) ready_on = s;
    }
  }
  const std::optional<Stream> consumer_stream = consumer.stream();
  const Stream accumulate_on = consumer_stream && consumer_stream->device() == device
                                   ? *consumer_stream
                                   : default_stream(device);
  if (!slot.defined()) {
    slot = std::move(grad);
    if (ready_on != accumulate_on) {
      Event ready;
      ready.record(ready_on);
      buffer.waits.push_back(PendingWait{accumulate_on, std::move(ready)});
    }
    return;
  }
  buffer.queue_waits();
  if (ready_on != accumulate_on) wait_stream(accumulate_on, ready_on);
  StreamGuard guard(accumulate_on);
  slot = slot + grad;
}

// Checks a node's outputs against the metadata its next edges expect: count, shape (a
// broadcast gradient is summed down), dtype (cast), device (must match, but for 0-d CPU inputs).
void validate_outputs(const Node& fn, variable_list& grads) {
  FERRY_CHECK(grads.size() == fn.num_outputs(), "function ", fn.name(),
              " returned an incorrect number of gradients (expected ", fn.num_outputs(), ", got ",
              grads.size(), ")");
  for (size_t i = 0; i < grads.size(); ++i) {
    const Edge& edge = fn.next_edge(i);
    if (!edge.is_valid()) {
      grads[i] = Tensor();
      continue;
    }
    Tensor& g = grads[i];
    if (!g.defined()) continue;
    const InputMetadata& meta = edge.function->input_metadata(edge.input_nr);
    if (!meta.defined) continue;
    if (!g.sizes().equals(meta.shape)) {
      FERRY_CHECK_AS(ShapeError, is_expandable_to(meta.shape, g.sizes()), "function ", fn.name(),
                     " returned an invalid gradient at index ", i, " - got ", g.sizes(),
                     " but expected shape compatible with ", IntArrayRef(meta.shape));
      g = sum_to(g, meta.shape);
    }
    // A 0-d CPU tensor may join a device operation as a number; its gradient, reduced on the
    // device, goes back to the CPU (a blocking copy on the node's stream), as in PyTorch.
    if (g.device() != meta.device && g.dim() == 0 && meta.device.is_cpu()) g = g.to(meta.device);
    FERRY_CHECK_AS(DeviceError, g.device() == meta.device, "function ", fn.name(),
                   " returned an invalid gradient at index ", i, " - expected device ", meta.device,
                   " but got ", g.device());
    if (g.dtype() != meta.dtype) g = g.to(meta.dtype);
  }
}

void evaluate(NodeTask task) {
  GraphTask& g = *task.graph;
  Node& fn = *task.fn;
  task.inputs.queue_waits();
  if (!g.exec_info.empty()) {
    const ExecInfo& info = g.exec_info.at(&fn);
    if (!info.captures.empty()) {
      std::lock_guard<std::mutex> lock(g.mutex);
      for (auto [input_nr, index] : info.captures) g.captured[index] = task.inputs.grads[input_nr];
    }
    if (!info.needed) return;
  }
  variable_list outputs;
  std::optional<Stream> stream = fn.stream();
  std::vector<Stream> declared;
  {
    std::optional<StreamGuard> stream_guard;
    if (stream) stream_guard.emplace(*stream);
    fn.run_retain_grad_hooks(task.inputs.grads);
    struct Declared {
      std::vector<Stream>* previous;
      ~Declared() { tls_gradient_streams = previous; }
    } restore{tls_gradient_streams};
    tls_gradient_streams = &declared;
    outputs = fn(std::move(task.inputs.grads));
    if (!g.keep_graph) fn.release_variables();
    validate_outputs(fn, outputs);
  }
  if (dynamic_cast<AccumulateGrad*>(&fn) != nullptr && stream) {
    std::lock_guard<std::mutex> lock(g.mutex);
    if (std::find(g.leaf_streams.begin(), g.leaf_streams.end(), *stream) == g.leaf_streams.end()) {
      g.leaf_streams.push_back(*stream);
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Edge& next = fn.next_edge(i);
    if (!next.is_valid()) continue;
    Node* consumer = next.function.get();
    std::optional<NodeTask> ready;
    {
      std::lock_guard<std::mutex> lock(g.mutex);
      auto dep = g.dependencies.find(consumer);
      FERRY_CHECK(dep != g.dependencies.end(), "autograd engine: ", consumer->name(),
                  " was not found in the dependency table");
      auto [it, inserted] = g.not_ready.try_emplace(consumer, consumer->num_inputs());
      if (outputs[i].defined()) {
        accumulate_input(it->second, next.input_nr, std::move(outputs[i]), stream, declared,
                         *consumer);
      }
      if (--dep->second == 0) {
        ready = NodeTask{task.graph, next.function, std::move(it->second)};
        g.not_ready.erase(it);
      }
    }
    if (ready) push_ready(task.graph, std::move(*ready));
  }
}

// Runs one task with the graph's thread-local state, recording the first failure. Returns
// whether it was the graph's last outstanding task.
bool run_task(NodeTask task) {
  std::shared_ptr<GraphTask> graph = task.graph;
  if (!graph->failed.load()) {
    const LocalDispatchKeySet saved_keys = local_dispatch_key_set();
    set_local_dispatch_key_set(graph->key_set);
    AutoGradMode mode(graph->grad_mode);
    try {
      evaluate(std::move(task));
    } catch (...) {
      std::lock_guard<std::mutex> lock(graph->mutex);
      if (!graph->failed.exchange(true)) graph->error = std::current_exception();
    }
    set_local_dispatch_key_set(saved_keys);
  }
  if (graph->outstanding.fetch_sub(1) != 1) return false;
  mark_done(*graph);
  return true;
}

// CPU nodes go to the queue of the thread that started the graph (captured in the task's
// graph), device nodes to their device's engine thread; a nested graph keeps everything local.
struct QueueRouting {
  ReadyQueue* local = nullptr;
  bool nested = false;
};
std::mutex routing_mutex;
std::unordered_map<GraphTask*, QueueRouting> routing;

void push_ready(const std::shared_ptr<GraphTask>& graph, NodeTask task) {
  graph->outstanding.fetch_add(1);
  QueueRouting r;
  {
    std::lock_guard<std::mutex> lock(routing_mutex);
    r = routing.at(graph.get());
  }
  const Device device = task.fn->device();
  if (r.nested || device.is_cpu()) {
    r.local->push(std::move(task));
  } else {
    DeviceThreads::get().queue_for(device).push(std::move(task));
  }
}

void DeviceThreads::run(ReadyQueue& queue, Device device) {
  tls_engine_depth = 1;
  // The pool's CPUs, not the one an OpenMP binding gave the thread that started this one.
  ferry::detail::use_pool_cpus();
  DeviceGuard device_guard(device);
  while (true) {
    std::optional<NodeTask> task = queue.pop([] { return false; });
    if (!task) continue;
    std::shared_ptr<GraphTask> graph = task->graph;
    // The caller's thread waits on its own queue; wake it when the graph is done.
    if (run_task(std::move(*task))) {
      std::lock_guard<std::mutex> lock(routing_mutex);
      auto it = routing.find(graph.get());
      if (it != routing.end()) it->second.local->wake();
    }
  }
}

// ---- setting up a graph -------------------------------------------------------------------

void compute_dependencies(Node* root, GraphTask& g) {
  std::vector<Node*> stack{root};
  std::unordered_set<Node*> seen{root};
  while (!stack.empty()) {
    Node* fn = stack.back();
    stack.pop_back();
    for (const Edge& e : fn->next_edges()) {
      Node* next = e.function.get();
      if (next == nullptr) continue;
      ++g.dependencies[next];
      if (seen.insert(next).second) stack.push_back(next);
    }
  }
}

// autograd::grad: which nodes must run to reach the requested edges, and where to capture.
void init_exec_info(Node* root, const edge_list& outputs, GraphTask& g) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    Node* fn = outputs[i].function.get();
    g.exec_info[fn].captures.emplace_back(outputs[i].input_nr, i);
  }
  g.captured.resize(outputs.size());
  // Post-order over the graph: a node is needed when one of its next nodes should execute.
  std::unordered_set<Node*> visited;
  std::vector<std::pair<Node*, size_t>> stack{{root, 0}};
  visited.insert(root);
  while (!stack.empty()) {
    auto& [fn, child] = stack.back();
    if (child < fn->next_edges().size()) {
      Node* next = fn->next_edge(child++).function.get();
      if (next != nullptr && visited.insert(next).second) stack.emplace_back(next, 0);
      continue;
    }
    ExecInfo& info = g.exec_info[fn];
    for (const Edge& e : fn->next_edges()) {
      if (!e.is_valid()) continue;
      auto it = g.exec_info.find(e.function.get());
      if (it != g.exec_info.end() && it->second.should_execute()) info.needed = true;
    }
    stack.pop_back();
  }
}

}  // namespace

Engine& Engine::get() {
  static Engine engine;
  return engine;
}

int Engine::num_device_threads() const { return DeviceThreads::get().count(); }

variable_list Engine::execute(const edge_list& roots, const variable_list& grad_outputs,
                              bool keep_graph, bool create_graph, const edge_list& outputs) {
  FERRY_CHECK(roots.size() == grad_outputs.size(), "autograd: expected one gradient per root (",
              roots.size(), "), but got ", grad_outputs.size());
  auto graph = std::make_shared<GraphTask>();
  graph->keep_graph = keep_graph;
  graph->grad_mode = create_graph;
  graph->key_set = local_dispatch_key_set();
  graph->root = make_intrusive<GraphRoot>(roots, grad_outputs);
  Node* root = graph->root.get();
  compute_dependencies(root, *graph);
  if (!outputs.empty()) init_exec_info(root, outputs, *graph);

  // The caller's current streams, which wait for the leaves' streams at the end.
  std::vector<Stream> caller_streams;
  for (const Tensor& g : grad_outputs) {
    if (g.defined() && !g.device().is_cpu()) caller_streams.push_back(current_stream(g.device()));
  }

  ReadyQueue local_queue;
  ReadyQueue* const previous_queue = tls_local_queue;
  tls_local_queue = &local_queue;
  const bool nested = tls_engine_depth > 0;
  {
    std::lock_guard<std::mutex> lock(routing_mutex);
    routing[graph.get()] = QueueRouting{&local_queue, nested};
  }
  ++tls_engine_depth;
  struct Restore {
    GraphTask* graph;
    ReadyQueue* previous;
    ~Restore() {
      --tls_engine_depth;
      tls_local_queue = previous;
      std::lock_guard<std::mutex> lock(routing_mutex);
      routing.erase(graph);
    }
  } restore{graph.get(), previous_queue};

  push_ready(graph, NodeTask{graph, graph->root, InputBuffer(0)});
  while (true) {
    std::optional<NodeTask> task = local_queue.pop([&] {
      std::lock_guard<std::mutex> lock(graph->mutex);
      return graph->done;
    });
    if (!task) break;
    run_task(std::move(*task));
  }
  std::exception_ptr error;
  {
    // Device threads may still be finishing their last task's bookkeeping.
    std::unique_lock<std::mutex> lock(graph->mutex);
    graph->done_cv.wait(lock, [&] { return graph->done; });
    // Taken out of the graph, so the exception dies on this thread (the last reference to the
    // graph may be a device thread's, dropped at any time).
    error = std::move(graph->error);
    graph->error = nullptr;
  }
  if (error) std::rethrow_exception(error);

  for (const Stream& leaf : graph->leaf_streams) {
    bool synced = false;
    for (const Stream& caller : caller_streams) {
      if (caller.device() == leaf.device()) {
        if (caller != leaf) wait_stream(caller, leaf);
        synced = true;
      }
    }
    if (!synced) {
      const Stream current = current_stream(leaf.device());
      if (current != leaf) wait_stream(current, leaf);
    }
  }
  return graph->captured;
}

// ---- the user-facing entry points -----------------------------------------------------------

void set_gradient_stream(const Stream& stream) {
  FERRY_CHECK(tls_gradient_streams != nullptr,
              "set_gradient_stream: expected a call from inside a backward function that the "
              "engine is running, but there is none on this thread");
  if (stream.is_cpu()) return;
  for (Stream& s : *tls_gradient_streams) {
    if (s.device() == stream.device()) {
      s = stream;
      return;
    }
  }
  tls_gradient_streams->push_back(stream);
}

namespace {

variable_list make_grads(const variable_list& tensors, const variable_list& grad_tensors) {
  FERRY_CHECK(grad_tensors.empty() || grad_tensors.size() == tensors.size(),
              "grad_tensors: expected ", tensors.size(), " gradients, but got ",
              grad_tensors.size());
  variable_list grads;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    FERRY_CHECK(t.defined(), "autograd: expected defined tensors to differentiate, but output ", i,
                " is undefined");
    if (!grad_tensors.empty() && grad_tensors[i].defined()) {
      const Tensor& g = grad_tensors[i];
      FERRY_CHECK_AS(ShapeError, g.sizes().equals(t.sizes()), "Mismatch in shape: grad_output[", i,
                     "] has a shape of ", g.sizes(), " and output[", i, "] has a shape of ",
                     t.sizes(), ".");
      grads.push_back(g);
      continue;
    }
    FERRY_CHECK(t.numel() == 1, "grad can be implicitly created only for scalar outputs, but ",
                "output ", i, " has sizes ", t.sizes());
    grads.push_back(ones(t.sizes(), t.options()));
  }
  return grads;
}

edge_list root_edges(const variable_list& tensors) {
  edge_list roots;
  for (size_t i = 0; i < tensors.size(); ++i) {
    Edge e = gradient_edge(tensors[i]);
    FERRY_CHECK(e.is_valid(), "element ", i,
                " of tensors does not require grad and does not have a grad_fn");
    roots.push_back(std::move(e));
  }
  return roots;
}

}  // namespace

void backward(const variable_list& tensors, const variable_list& grad_tensors,
              std::optional<bool> retain_graph, bool create_graph) {
  const variable_list grads = make_grads(tensors, grad_tensors);
  Engine::get().execute(root_edges(tensors), grads, retain_graph.value_or(create_graph),
                        create_graph);
}

variable_list grad(const variable_list& outputs, const variable_list& inputs,
                   const variable_list& grad_outputs, std::optional<bool> retain_graph,
                   bool create_graph, bool allow_unused) {
  const variable_list grads = make_grads(outputs, grad_outputs);
  edge_list input_edges;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Edge e = gradient_edge(inputs[i]);
    FERRY_CHECK(e.is_valid(), "One of the differentiated Tensors (input ", i,
                ") does not require grad");
    input_edges.push_back(std::move(e));
  }
  variable_list result = Engine::get().execute(
      root_edges(outputs), grads, retain_graph.value_or(create_graph), create_graph, input_edges);
  for (size_t i = 0; i < result.size(); ++i) {
    FERRY_CHECK(allow_unused || result[i].defined(), "One of the differentiated Tensors (input ", i,
                ") appears to not have been used in the graph. Set allow_unused=true if this "
                "is the desired behavior.");
  }
  return result;
}

}  // namespace ferry::autograd
