// The checkpoint and recompute nodes (see checkpoint.h).
#include "ferry/pipeline/checkpoint.h"

#include "ferry/autograd/engine.h"
#include "ferry/autograd/grad_mode.h"
#include "ferry/core/error.h"
#include "ferry/core/thread_generator.h"
#include "ferry/pipeline/dependency.h"
#include "ferry/pipeline/function.h"

namespace ferry::pipeline {
namespace {

thread_local bool tls_recomputing = false;
thread_local bool tls_checkpointing = false;

class FlagGuard {
 public:
  explicit FlagGuard(bool& flag) : flag_(flag), previous_(flag) { flag_ = true; }
  FlagGuard(const FlagGuard&) = delete;
  FlagGuard& operator=(const FlagGuard&) = delete;
  ~FlagGuard() { flag_ = previous_; }

 private:
  bool& flag_;
  bool previous_;
};

using State = std::shared_ptr<CheckpointState>;

// torchgpipe's Checkpoint.backward: a nested backward through the recomputed graph.
variable_list checkpoint_backward(const State& state, variable_list grads) {
  std::pair<Tensor, Tensor> recomputed;
  {
    std::lock_guard<std::mutex> lock(state->mutex);
    FERRY_CHECK(!state->recomputed.empty(), "pipeline checkpoint: expected the recompute node to ",
                "have run before the checkpoint's backward, but it has not");
    recomputed = std::move(state->recomputed.back());
    state->recomputed.pop_back();
  }
  auto& [output, input_leaf] = recomputed;
  if (output.requires_grad()) autograd::backward({output}, {grads[0]});
  return {Tensor(), input_leaf.requires_grad() ? input_leaf.grad() : Tensor()};
}

// torchgpipe's Recompute.backward: the partition again, recording, with the same random values.
variable_list recompute_backward(const State& state) {
  Tensor input;
  {
    std::lock_guard<std::mutex> lock(state->mutex);
    input = std::move(state->input);
  }
  FERRY_CHECK(input.defined(), "pipeline checkpoint: expected to recompute once, but the ",
              "recompute node ran twice (backward through the pipeline twice needs "
              "checkpoint=\"never\")");
  Tensor input_leaf = input.detach();
  if (input.requires_grad()) input_leaf.requires_grad_(true);
  if (state->on_recompute) state->on_recompute(true);
  Tensor output;
  {
    Generator generator(state->seed);
    ThreadGeneratorGuard rng(&generator);
    FlagGuard recomputing(tls_recomputing);
    autograd::AutoGradMode grad_mode(true);
    output = state->function(input_leaf);
  }
  if (state->on_recompute) state->on_recompute(false);
  std::lock_guard<std::mutex> lock(state->mutex);
  state->recomputed.emplace_back(std::move(output), std::move(input_leaf));
  return {Tensor(), Tensor()};
}

}  // namespace

bool is_recomputing() { return tls_recomputing; }
bool is_checkpointing() { return tls_checkpointing; }

Checkpointing::Checkpointing(PartitionFunction function, Tensor input, uint64_t seed,
                             std::function<void(bool)> on_recompute)
    : state_(std::make_shared<CheckpointState>()) {
  state_->function = std::move(function);
  state_->input = std::move(input);
  state_->seed = seed;
  state_->on_recompute = std::move(on_recompute);
}

Tensor Checkpointing::checkpoint() {
  const Tensor input = state_->input;
  // A phony that requires grad gives the checkpoint node a place in the graph even when the
  // input does not require grad (the first partition): the parameters still need gradients.
  const Tensor phony = get_phony(input.device(), /*requires_grad=*/true);
  Tensor output;
  {
    autograd::AutoGradMode no_grad(false);
    Generator generator(state_->seed);
    ThreadGeneratorGuard rng(&generator);
    FlagGuard checkpointing(tls_checkpointing);
    output = state_->function(input);
  }
  variable_list outputs{output};
  record_function("ferry::pipeline::CheckpointBackward", {phony, input}, outputs,
                  [state = state_](variable_list grads) {
                    return checkpoint_backward(state, std::move(grads));
                  });
  return outputs[0];
}

void Checkpointing::recompute(Tensor& output) {
  auto [forked, phony] = fork(output);
  variable_list done{phony.detach()};
  record_function("ferry::pipeline::RecomputeBackward", {phony, state_->input}, done,
                  [state = state_](variable_list /*grads*/) { return recompute_backward(state); });
  output = join(forked, done[0]);
}

}  // namespace ferry::pipeline
