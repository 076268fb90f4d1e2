// The backward engine. From the roots it counts, for every reachable node, how many gradients
// it will receive, then runs each node once all have arrived, most recently created first.
// Nodes whose outputs live on a device run on that device's engine thread (one per device,
// started on first use), on the stream their forward ran on; CPU nodes run on the thread that
// called backward, which returns when the whole graph is done (or rethrows the first error,
// naming the node). Where a gradient produced on one stream is consumed on another, the
// consumer's stream waits on an event recorded on the producer's: never a device synchronize.
// A backward started from inside a node (a checkpoint's recompute) runs entirely on the
// calling engine thread, so nested backwards never wait on a busy queue.
#pragma once

#include "ferry/autograd/node.h"

namespace ferry::autograd {

class Engine {
 public:
  static Engine& get();

  // Runs the graph behind `roots`, seeded with `grad_outputs` (one per root). With `outputs`
  // empty, gradients are accumulated into the leaves' grad() and nothing is returned; otherwise
  // the gradients flowing into those edges are returned (one per edge, undefined where none
  // flows) and leaves are left alone (autograd::grad). keep_graph: the nodes keep their saved
  // tensors; create_graph: the backward itself is recorded (for higher-order gradients).
  variable_list execute(const edge_list& roots, const variable_list& grad_outputs, bool keep_graph,
                        bool create_graph, const edge_list& outputs = {});

  // Engine threads started so far (one per device that ran a node).
  int num_device_threads() const;

 private:
  Engine() = default;
};

// For a backward function whose gradients cross devices (the backward of a copy to another
// device): declares that its outputs on stream.device() are ready on `stream`, so that each
// consumer's stream waits for `stream`, when the consumer runs. Without it the engine waits for
// that device's default stream (which a plain copy makes wait for itself). A CPU stream is
// ignored. Raises ferry::Error outside a backward function the engine runs.
void set_gradient_stream(const Stream& stream);

// torch.autograd.backward: accumulates the gradients of `tensors` (seeded with grad_tensors,
// or ones for one-element tensors when omitted) into the leaves.
void backward(const variable_list& tensors, const variable_list& grad_tensors = {},
              std::optional<bool> retain_graph = std::nullopt, bool create_graph = false);

// torch.autograd.grad: the gradients of `outputs` with respect to `inputs`. allow_unused false
// raises when an input is not reachable from the outputs.
variable_list grad(const variable_list& outputs, const variable_list& inputs,
                   const variable_list& grad_outputs = {},
                   std::optional<bool> retain_graph = std::nullopt, bool create_graph = false,
                   bool allow_unused = false);

}  // namespace ferry::autograd
