// Workers (see worker.h).
#include "ferry/pipeline/worker.h"

#include "ferry/autograd/grad_mode.h"
#include "ferry/device/guard.h"
#include "ferry/iter/parallel.h"

namespace ferry::pipeline {

Workers::Workers(const std::vector<Stream>& compute_streams, bool grad_enabled) {
  for (size_t j = 0; j < compute_streams.size(); ++j) queues_.push_back(std::make_unique<Queue>());
  try {
    for (size_t j = 0; j < compute_streams.size(); ++j) {
      threads_.emplace_back([this, j, stream = compute_streams[j], grad_enabled] {
        ferry::detail::use_pool_cpus();  // not the one CPU an OpenMP binding gave the caller
        run(*queues_[j], stream, grad_enabled);
      });
    }
  } catch (...) {
    shutdown();
    throw;
  }
}

Workers::~Workers() { shutdown(); }

void Workers::shutdown() noexcept {
  for (auto& q : queues_) {
    std::lock_guard<std::mutex> lock(q->mutex);
    q->stop = true;
    q->cv.notify_all();
  }
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

void Workers::put(size_t partition, std::function<Tensor()> task) {
  Queue& q = *queues_.at(partition);
  std::lock_guard<std::mutex> lock(q.mutex);
  q.tasks.push_back(std::move(task));
  q.cv.notify_all();
}

TaskResult Workers::get(size_t partition) {
  Queue& q = *queues_.at(partition);
  std::unique_lock<std::mutex> lock(q.mutex);
  q.cv.wait(lock, [&] { return !q.results.empty(); });
  TaskResult result = std::move(q.results.front());
  q.results.pop_front();
  return result;
}

void Workers::run(Queue& q, Stream stream, bool grad_enabled) {
  StreamGuard stream_guard(stream);
  autograd::AutoGradMode grad_mode(grad_enabled);
  for (;;) {
    std::function<Tensor()> task;
    {
      std::unique_lock<std::mutex> lock(q.mutex);
      q.cv.wait(lock, [&] { return q.stop || !q.tasks.empty(); });
      if (q.tasks.empty()) return;  // stopped
      task = std::move(q.tasks.front());
      q.tasks.pop_front();
    }
    TaskResult result;
    try {
      result.output = task();
    } catch (...) {
      result.error = std::current_exception();
    }
    task = nullptr;  // drop what the task captured on this thread
    std::lock_guard<std::mutex> lock(q.mutex);
    q.results.push_back(std::move(result));
    q.cv.notify_all();
  }
}

}  // namespace ferry::pipeline
