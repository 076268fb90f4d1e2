// GPipe::forward: the clock-cycle loop of torchgpipe's Pipeline.run (fence, then compute),
// with the workers, streams, checkpoints and tracing spans it needs (see gpipe.h).
#include "ferry/pipeline/gpipe.h"

#include <exception>
#include <numeric>
#include <sstream>

#include "ferry/autograd/grad_mode.h"
#include "ferry/core/generator.h"
#include "ferry/core/thread_generator.h"
#include "ferry/pipeline/batchnorm.h"
#include "ferry/pipeline/checkpoint.h"
#include "ferry/pipeline/copy.h"
#include "ferry/pipeline/dependency.h"
#include "ferry/pipeline/function.h"
#include "ferry/pipeline/microbatch.h"
#include "ferry/pipeline/schedule.h"
#include "ferry/pipeline/stream.h"
#include "ferry/pipeline/worker.h"

namespace ferry::pipeline {
namespace {

std::string lane(Device device, const char* what) {
  std::ostringstream out;
  out << device << " " << what;
  return out.str();
}

// One (micro-batch, partition)'s backward span, opened when the gradient reaches the partition's
// output and closed when it has gone through to its input.
struct BackwardSpan {
  std::shared_ptr<Tracer> tracer;
  Device device;
  int64_t microbatch = 0;
  int64_t partition = 0;
  size_t index = 0;
};
using SpanPtr = std::shared_ptr<BackwardSpan>;

// Identities whose backward opens (at a partition's output) or closes (at its input) the span.
Tensor backward_begin(const SpanPtr& span, const Tensor& x) {
  variable_list out{x.detach()};
  record_function("ferry::pipeline::TraceBackward", {x}, out, [span](variable_list grads) {
    span->index = span->tracer->begin(current_stream(span->device), lane(span->device, "compute"),
                                      SpanKind::Backward, span->microbatch, span->partition);
    return grads;
  });
  return out[0];
}

Tensor backward_end(const SpanPtr& span, const Tensor& x) {
  variable_list out{x.detach()};
  record_function("ferry::pipeline::TraceBackward", {x}, out, [span](variable_list grads) {
    span->tracer->end(current_stream(span->device), span->index);
    return grads;
  });
  return out[0];
}

std::string describe(int64_t microbatch, int64_t partition, Device device) {
  std::ostringstream out;
  out << "GPipe: partition " << partition << " (on " << device << ") failed on micro-batch "
      << microbatch << ": ";
  return out.str();
}

std::string message_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

}  // namespace

CheckpointMode parse_checkpoint_mode(const std::string& mode) {
  if (mode == "always") return CheckpointMode::Always;
  if (mode == "except_last") return CheckpointMode::ExceptLast;
  if (mode == "never") return CheckpointMode::Never;
  FERRY_FAIL_AS(Error,
                "GPipe: expected checkpoint \"always\", \"except_last\" or \"never\", but got \"",
                mode, "\"");
  return CheckpointMode::Never;
}

const char* checkpoint_mode_name(CheckpointMode mode) {
  switch (mode) {
    case CheckpointMode::Always:
      return "always";
    case CheckpointMode::ExceptLast:
      return "except_last";
    case CheckpointMode::Never:
      return "never";
  }
  return "?";
}

GPipe::GPipe(nn::Sequential module, std::vector<int64_t> balance, std::vector<Device> devices,
             int64_t chunks, const std::string& checkpoint, bool deferred_batch_norm)
    : devices_(std::move(devices)),
      balance_(std::move(balance)),
      chunks_(chunks),
      checkpoint_(parse_checkpoint_mode(checkpoint)) {
  FERRY_CHECK(chunks_ >= 1, "GPipe: expected chunks >= 1, but got ", chunks_);
  FERRY_CHECK(!balance_.empty(), "GPipe: expected at least one partition in balance, but got none");
  FERRY_CHECK(balance_.size() == devices_.size(), "GPipe: expected one device per partition (",
              balance_.size(), " partitions), but got ", devices_.size(), " devices");
  for (size_t j = 0; j < balance_.size(); ++j) {
    FERRY_CHECK(balance_[j] >= 1, "GPipe: expected a positive layer count for every partition, ",
                "but partition ", j, " has ", balance_[j]);
  }
  const int64_t total = std::accumulate(balance_.begin(), balance_.end(), int64_t{0});
  FERRY_CHECK(total == static_cast<int64_t>(module->size()), "GPipe: expected balance to sum to ",
              "the module's ", module->size(), " layers, but it sums to ", total);
  training_ = module->is_training();
  nn::Sequential full = deferred_batch_norm ? convert_deferred_batch_norm(module, chunks_) : module;
  int64_t offset = 0;
  for (size_t j = 0; j < balance_.size(); ++j) {
    nn::Sequential part = full.slice(offset, offset + balance_[j]);
    offset += balance_[j];
    part->to(devices_[j]);
    part->train(training_);
    partitions_.push_back(part);
  }
}

void GPipe::train(bool on) {
  training_ = on;
  for (nn::Sequential& part : partitions_) part->train(on);
}

std::vector<Tensor> GPipe::parameters() const {
  std::vector<Tensor> out;
  for (const nn::Sequential& part : partitions_) {
    for (const Tensor& p : part.ptr()->parameters()) out.push_back(p);
  }
  return out;
}

Tensor GPipe::forward(const Tensor& input) {
  FERRY_CHECK_AS(DeviceError, input.defined() && input.device() == devices_[0],
                 "GPipe: expected the input on ", devices_[0], " (the first partition's device), ",
                 "but it is on ", input.defined() ? input.device() : Device("cpu"));
  std::vector<Batch> batches = scatter({input}, chunks_);
  const auto m = static_cast<int64_t>(batches.size());
  const auto n = static_cast<int64_t>(partitions_.size());
  const bool grad = autograd::GradMode::is_enabled();
  int64_t checkpoint_stop = 0;
  if (training_ && grad) {
    checkpoint_stop = checkpoint_ == CheckpointMode::Always       ? m
                      : checkpoint_ == CheckpointMode::ExceptLast ? m - 1
                                                                  : 0;
  }
  Generator& rng = default_generator();
  const uint64_t base_seed = Generator::bits(rng.seed(), rng.reserve(1));
  auto seed_of = [&](int64_t i, int64_t j) {
    return Generator::bits(base_seed, static_cast<uint64_t>(i * n + j));
  };

  std::vector<Stream> compute(n);
  std::vector<std::vector<Stream>> copy_streams(n);
  for (int64_t j = 0; j < n; ++j) {
    compute[j] = default_stream(devices_[j]);
    for (int64_t i = 0; i < m; ++i) copy_streams[j].push_back(new_stream(devices_[j]));
  }
  std::vector<std::shared_ptr<Checkpointing>> checkpoints(m);
  std::vector<SpanPtr> spans(m);
  const std::shared_ptr<Tracer> tracer = tracer_;

  Workers workers(compute, grad);
  for (const std::vector<Cell>& schedule : clock_cycles(m, n)) {
    // Fence: the phony dependencies and the copies into each partition's copy stream.
    for (auto [i, j] : schedule) {
      try {
        // The fork is recorded on the copy stream that carries batches[i - 1] (partition j's
        // output for micro-batch i - 1), the join on the one that carries batches[i] into
        // partition j: their backward nodes then pass gradients on where the gradients arrive,
        // and the Waits queue the compute streams' waits in backward order. (Recorded on the
        // compute stream, a join's wait was queued as soon as micro-batch i's gradient was
        // copied, ahead of micro-batch i + 1's backward there.)
        if (i != 0) {
          depend(batches[i - 1], batches[i], copy_streams[j][i - 1],
                 j != 0 ? std::optional<Stream>(copy_streams[j - 1][i]) : std::nullopt);
        }
        if (j != 0) {
          const Stream& prev = copy_streams[j - 1][i];
          const Stream& next = copy_streams[j][i];
          const Stream& on = prev.is_cpu() ? next : prev;
          size_t span = 0;
          if (tracer) span = tracer->begin(on, lane(devices_[j - 1], "copy"), SpanKind::Copy, i, j);
          copy(batches[i], prev, next);
          // Closed on next: work that waits for next (the Wait below) comes after the stamp.
          if (tracer) tracer->end(next, span);
        }
      } catch (const std::exception& e) {
        throw PipelineError(describe(i, j, devices_[j]) + "copying its input: " + e.what());
      }
    }
    // Compute: each partition's worker runs its micro-batch.
    for (auto [i, j] : schedule) {
      if (j != 0) wait(batches[i], copy_streams[j][i], compute[j]);
      Tensor x = batches[i][0];
      if (tracer && grad) {
        spans[i] = std::make_shared<BackwardSpan>(BackwardSpan{tracer, devices_[j], i, j, 0});
        if (!x.requires_grad()) x = x.detach().requires_grad_(true);
        x = backward_end(spans[i], x);
      }
      nn::Sequential part = partitions_[j];
      PartitionFunction function = [part](const Tensor& in) { return part.ptr()->forward(in); };
      const uint64_t seed = seed_of(i, j);
      std::shared_ptr<Checkpointing> chk;
      if (i < checkpoint_stop) {
        std::function<void(bool)> on_recompute;
        if (tracer) {
          auto index = std::make_shared<size_t>(0);
          on_recompute = [tracer, index, device = devices_[j], i, j](bool begin) {
            if (begin) {
              *index = tracer->begin(current_stream(device), lane(device, "compute"),
                                     SpanKind::Recompute, i, j);
            } else {
              tracer->end(current_stream(device), *index);
            }
          };
        }
        chk = std::make_shared<Checkpointing>(function, x, seed, std::move(on_recompute));
      }
      checkpoints[i] = chk;
      workers.put(j, [=, device = devices_[j]]() -> Tensor {
        size_t span = 0;
        if (tracer) {
          span = tracer->begin(current_stream(device), lane(device, "compute"), SpanKind::Forward,
                               i, j);
        }
        Tensor y;
        if (chk) {
          y = chk->checkpoint();
        } else {
          Generator generator(seed);
          ThreadGeneratorGuard rng_guard(&generator);
          y = function(x);
        }
        if (tracer) tracer->end(current_stream(device), span);
        return y;
      });
    }
    // Collect, in schedule order; hold the first failure until every task of the clock is back.
    std::exception_ptr failure;
    std::string failure_where;
    for (auto [i, j] : schedule) {
      TaskResult result = workers.get(j);
      if (result.error) {
        if (!failure) {
          failure = result.error;
          failure_where = describe(i, j, devices_[j]);
        }
        continue;
      }
      if (failure) continue;
      Batch batch{result.output};
      if (spans[i] && batch[0].requires_grad()) batch[0] = backward_begin(spans[i], batch[0]);
      if (j != n - 1) wait(batch, compute[j], copy_streams[j][i]);
      if (checkpoints[i]) checkpoints[i]->recompute(batch[0]);
      checkpoints[i].reset();
      batches[i] = std::move(batch);
    }
    if (failure) throw PipelineError(failure_where + message_of(failure));
  }
  return gather(batches)[0];
}

}  // namespace ferry::pipeline
