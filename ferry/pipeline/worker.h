// The pipeline's workers: one thread per partition, each with its partition's compute stream
// current (and its device the current one) and the caller's grad mode, running the tasks it is
// given in order and handing back each result or exception. The destructor stops and joins every
// thread, so no thread outlives the forward that made them, whatever was thrown.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "ferry/core/tensor.h"
#include "ferry/device/stream.h"

namespace ferry::pipeline {

struct TaskResult {
  Tensor output;
  std::exception_ptr error;  // null on success
};

class Workers {
 public:
  Workers(const std::vector<Stream>& compute_streams, bool grad_enabled);
  Workers(const Workers&) = delete;
  Workers& operator=(const Workers&) = delete;
  ~Workers();

  void put(size_t partition, std::function<Tensor()> task);
  // The next result of `partition`'s worker, in the order the tasks were put.
  TaskResult get(size_t partition);

 private:
  struct Queue {
    std::mutex mutex;
    std::condition_variable cv;
    std::deque<std::function<Tensor()>> tasks;
    std::deque<TaskResult> results;
    bool stop = false;
  };
  void run(Queue& queue, Stream stream, bool grad_enabled);
  void shutdown() noexcept;

  std::vector<std::unique_ptr<Queue>> queues_;
  std::vector<std::thread> threads_;
};

}  // namespace ferry::pipeline
