// GPipe::forward: the clock-cycle loop of torchgpipe's Pipeline.run (fence, then compute),
// with the workers, streams, checkpoints and tracing spans it needs (see gpipe.h).
#include "ferry/pipeline/gpipe.h"

#include <algorithm>
#include <exception>
#include <numeric>
#include <sstream>

#include "ferry/autograd/grad_mode.h"
#include "ferry/core/generator.h"
#include "ferry/core/thread_generator.h"
#include "ferry/ops/factories.h"
#include "ferry/pipeline/batchnorm.h"
#include "ferry/pipeline/checkpoint.h"
#include "ferry/pipeline/copy.h"
#include "ferry/pipeline/dependency.h"
#include "ferry/pipeline/function.h"
#include "ferry/pipeline/microbatch.h"
#if FERRY_WITH_TRANSPORT
#include "ferry/pipeline/remote.h"
#endif
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
  ranks_.assign(devices_.size(), 0);
  last_ = static_cast<int64_t>(devices_.size()) - 1;
  build(std::move(module), deferred_batch_norm);
}

GPipe::GPipe(nn::Sequential module, std::vector<int64_t> balance,
             const std::vector<std::string>& placements, int64_t chunks,
             std::shared_ptr<transport::Group> group, const std::string& checkpoint,
             bool deferred_batch_norm)
    : balance_(std::move(balance)),
      chunks_(chunks),
      checkpoint_(parse_checkpoint_mode(checkpoint)) {
#if FERRY_WITH_TRANSPORT
  FERRY_CHECK(group != nullptr, "GPipe: expected a transport::Group for placements across ",
              "processes, but got none");
  for (const std::string& text : placements) {
    const Placement p = parse_placement(text);
    FERRY_CHECK(p.rank < group->size(), "GPipe: expected ranks below the group's size ",
                group->size(), ", but placement \"", text, "\" names rank ", p.rank);
    FERRY_CHECK(ranks_.empty() || p.rank >= ranks_.back(), "GPipe: expected the partitions' ",
                "ranks in order (each rank's partitions contiguous), but \"", text,
                "\" comes after rank ", ranks_.back());
    ranks_.push_back(p.rank);
    devices_.push_back(p.device);
  }
  const auto own = std::find(ranks_.begin(), ranks_.end(), group->rank());
  FERRY_CHECK(own != ranks_.end(), "GPipe: expected at least one partition on this process (rank ",
              group->rank(), "), but the placements give it none");
  first_ = own - ranks_.begin();
  last_ = std::find_if(own, ranks_.end(), [&](int r) { return r != group->rank(); }) -
          ranks_.begin() - 1;
  FERRY_CHECK(chunks_ < kCountSlot, "GPipe: expected fewer than ", kCountSlot, " chunks across ",
              "processes, but got ", chunks_);
  group_ = std::move(group);
  sends_ = std::make_shared<SendLog>();
  build(std::move(module), deferred_batch_norm);
#else
  (void)module, (void)placements, (void)group, (void)deferred_batch_norm;
  FERRY_FAIL_AS(NotImplementedError, "GPipe across processes needs ferry's transport (UCX), but ",
                "this build has none (configure with libucx-dev and libssl-dev installed)");
#endif
}

GPipe::~GPipe() {
#if FERRY_WITH_TRANSPORT
  if (sends_) {
    try {
      sends_->drain();
    } catch (const std::exception&) {
      // A peer gone or a send timed out: nothing left to deliver it to.
    }
  }
#endif
}

void GPipe::build(nn::Sequential module, bool deferred_batch_norm) {
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
    const auto local = static_cast<int64_t>(j);
    if (local >= first_ && local <= last_) part->to(devices_[j]);  // other ranks' stay put
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
  for (int64_t j = first_; j <= last_; ++j) {
    for (const Tensor& p : partitions_[j].ptr()->parameters()) out.push_back(p);
  }
  return out;
}

Tensor GPipe::forward(const Tensor& input) {
  const auto n = static_cast<int64_t>(partitions_.size());
  std::vector<Batch> batches;
  if (first_ == 0) {
    FERRY_CHECK_AS(DeviceError, input.defined() && input.device() == devices_[0],
                   "GPipe: expected the input on ", devices_[0], " (the first partition's ",
                   "device), but it is on ", input.defined() ? input.device() : Device("cpu"));
    batches = scatter({input}, chunks_);
  }
#if FERRY_WITH_TRANSPORT
  // Across processes: the previous rank says how many micro-batches come (scatter may make fewer
  // than chunks), and this rank tells the next.
  const uint64_t run = run_++;
  if (sends_) sends_->drain();  // the last run's sends, before this run's tags come round
  if (first_ > 0) {
    const Tensor count =
        group_->endpoint()
            .recv(group_->peer(ranks_[first_ - 1]), remote_tag(run, first_, kCountSlot, false))
            .get();
    batches.assign(static_cast<size_t>(count.item<int64_t>()), Batch{});
  }
  if (last_ < n - 1) {
    const Tensor count = full({1}, Scalar(static_cast<int64_t>(batches.size())), kInt64);
    sends_->add(group_->endpoint().send(count, group_->peer(ranks_[last_ + 1]),
                                        remote_tag(run, last_ + 1, kCountSlot, false)));
  }
  std::vector<Tensor> sent;  // across processes: the phonies of the micro-batches sent on
#endif
  const auto m = static_cast<int64_t>(batches.size());
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
  for (int64_t j = first_; j <= last_; ++j) {
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
      if (j < first_ || j > last_) continue;  // another rank's
      try {
#if FERRY_WITH_TRANSPORT
        if (j == first_ && j > 0) {
          batches[i] = {remote_recv(*group_, ranks_[j - 1], remote_tag(run, j, i, false),
                                    remote_tag(run, j, i, true), devices_[j], grad, sends_)};
        }
#endif
        // The fork is recorded on the copy stream that carries batches[i - 1] (partition j's
        // output for micro-batch i - 1), the join on the one that carries batches[i] into
        // partition j: their backward nodes then pass gradients on where the gradients arrive,
        // and the Waits queue the compute streams' waits in backward order. (Recorded on the
        // compute stream, a join's wait was queued as soon as micro-batch i's gradient was
        // copied, ahead of micro-batch i + 1's backward there.)
        if (i != 0) {
          depend(batches[i - 1], batches[i], copy_streams[j][i - 1],
                 j != first_ ? std::optional<Stream>(copy_streams[j - 1][i]) : std::nullopt);
        }
        if (j != first_) {
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
      if (j < first_ || j > last_) continue;
      // A micro-batch received from another rank was written on the compute stream already.
      if (j != first_) wait(batches[i], copy_streams[j][i], compute[j]);
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
      if (j < first_ || j > last_) continue;
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
      if (j != n - 1 && j != last_) wait(batch, compute[j], copy_streams[j][i]);
      if (checkpoints[i]) checkpoints[i]->recompute(batch[0]);
      checkpoints[i].reset();
#if FERRY_WITH_TRANSPORT
      if (j == last_ && j != n - 1) {
        // Read on the compute stream, current here: the send waits for it.
        sent.push_back(remote_send(*group_, ranks_[j + 1], remote_tag(run, j + 1, i, false),
                                   remote_tag(run, j + 1, i, true), batch[0], sends_));
      }
#endif
      batches[i] = std::move(batch);
    }
    if (failure) throw PipelineError(failure_where + message_of(failure));
  }
#if FERRY_WITH_TRANSPORT
  if (last_ != n - 1) {
    // The phonies' sum: a scalar zero whose backward receives each micro-batch's gradient from
    // the next rank and carries it through this rank's partitions.
    Tensor root;
    for (const Tensor& phony : sent) root = root.defined() ? root.add(phony.sum()) : phony.sum();
    return root.defined() ? root : zeros({}, TensorOptions(kFloat32).device(devices_[last_]));
  }
#endif
  return gather(batches)[0];
}

}  // namespace ferry::pipeline
