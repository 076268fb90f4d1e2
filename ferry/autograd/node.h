// Node: one recorded operation in the autograd graph (a grad_fn). It receives the gradients of
// the operation's outputs and returns the gradients of its inputs, which flow along its next
// edges. A node remembers, per output, the metadata a gradient must match (shape, dtype,
// device) and the stream the forward ran on: the engine runs apply() on that stream, so that
// backward is ordered after the forward's work exactly as on a GPU (PyTorch's stream rule).
// Nodes are reference counted; a tensor's grad_fn, the next edges of later nodes and the engine
// keep them alive.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ferry/core/intrusive_ptr.h"
#include "ferry/core/tensor.h"
#include "ferry/device/stream.h"

namespace ferry::autograd {

using variable_list = std::vector<Tensor>;
class Node;

// Where a gradient goes: input `input_nr` of `function` (null function: nowhere).
struct Edge {
  Edge() = default;
  Edge(IntrusivePtr<Node> function, uint32_t input_nr)
      : function(std::move(function)), input_nr(input_nr) {}
  bool is_valid() const { return static_cast<bool>(function); }

  IntrusivePtr<Node> function;
  uint32_t input_nr = 0;
};
using edge_list = std::vector<Edge>;

// What the gradient of one output must look like, and the stream its forward ran on.
struct InputMetadata {
  InputMetadata() = default;
  explicit InputMetadata(const Tensor& t);

  DimVector shape;
  ScalarType dtype = ScalarType::Float32;
  Device device;
  // The current stream of `device` when the output was recorded; nullopt on the CPU.
  std::optional<Stream> stream;
  bool defined = false;  // false for a placeholder (an undefined output)
};

class Node : public RefCounted {
 public:
  explicit Node(edge_list next_edges = {});
  ~Node() override = default;

  // Runs the backward: gradients of the outputs in, gradients of the inputs out (one per next
  // edge; undefined where nothing flows).
  variable_list operator()(variable_list&& grads) { return apply(std::move(grads)); }

  // "MulBackward0", as PyTorch names them.
  virtual std::string name() const = 0;

  // ---- outputs of the forward (the inputs of this node) -----------------------------------
  uint32_t add_input_metadata(const Tensor& output);
  uint32_t add_undefined_input();
  uint32_t num_inputs() const { return static_cast<uint32_t>(input_metadata_.size()); }
  const InputMetadata& input_metadata(uint32_t i) const { return input_metadata_[i]; }
  // The stream this node's backward runs on: that of its first output on a device.
  std::optional<Stream> stream() const;
  // The device of the first output (cpu when there is none): whose engine thread runs it.
  Device device() const;

  // ---- inputs of the forward (where gradients go) -----------------------------------------
  const edge_list& next_edges() const { return next_edges_; }
  const Edge& next_edge(size_t i) const { return next_edges_[i]; }
  uint32_t num_outputs() const { return static_cast<uint32_t>(next_edges_.size()); }
  void set_next_edges(edge_list edges) { next_edges_ = std::move(edges); }
  void add_next_edge(Edge edge) { next_edges_.push_back(std::move(edge)); }
  // Whether the gradient of forward input i is wanted (its edge leads somewhere).
  bool needs_input_grad(size_t i) const {
    return i < next_edges_.size() && next_edges_[i].is_valid();
  }

  // Order of creation in this process: a later forward node runs earlier in backward when two
  // are ready at once (PyTorch's priority), which keeps memory low.
  uint64_t sequence_nr() const { return sequence_nr_; }

  // Drops saved tensors once the graph will not run again (backward without retain_graph).
  virtual void release_variables() {}
  // Raises when a backward reaches a node whose saved tensors were released.
  void check_not_released() const;

  // Note [retain_grad]: output i's tensor keeps the gradient that reaches it. The hook holds
  // the tensor's impl weakly, so a retained tensor that goes away stops retaining.
  void add_retain_grad_hook(uint32_t output_nr, const Tensor& tensor);
  // Called by the engine with the gradients about to be passed to apply().
  void run_retain_grad_hooks(const variable_list& grads);

 protected:
  virtual variable_list apply(variable_list&& grads) = 0;
  // The last strong handle is gone but weak ones remain (a leaf's handle on its accumulator):
  // drop what the node owns, so that the tensors it holds are not kept alive by the weak handle.
  void release_resources() override;
  bool released_ = false;

 private:
  edge_list next_edges_;
  std::vector<InputMetadata> input_metadata_;
  uint64_t sequence_nr_;
  std::mutex hooks_mutex_;
  std::vector<std::pair<uint32_t, WeakIntrusivePtr<TensorImpl>>> retain_grad_hooks_;
};

// The next sequence number (thread-safe).
uint64_t next_sequence_nr();

}  // namespace ferry::autograd
