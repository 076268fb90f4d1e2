// The sim stream worker: queueing, executing, chaos delays, completion and waiting.
#include "ferry/backends/sim/sim_stream.h"

#include <pthread.h>

#include <exception>
#include <string>

#include "ferry/backends/sim/sim_access.h"
#include "ferry/core/error.h"
#include "ferry/iter/parallel.h"

namespace ferry::sim::detail {
namespace {

thread_local bool tls_on_worker = false;

using Clock = std::chrono::steady_clock;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Polls `ready` for up to SimStream::kSpin; true if it came true meanwhile.
template <class Ready>
bool spin_until(const Ready& ready) {
  const auto deadline = Clock::now() + SimStream::kSpin;
  for (int i = 0;; ++i) {
    if (ready()) return true;
    cpu_relax();
    if ((i & 63) == 63 && Clock::now() >= deadline) return false;
  }
}

}  // namespace

bool SimStream::on_worker_thread() { return tls_on_worker; }

SimStream::~SimStream() { shutdown(); }

uint64_t SimStream::enqueue(SimOp&& op, const char* call) {
  std::lock_guard<std::mutex> lock(mutex_);
  FERRY_CHECK_AS(DeviceError, !stop_, "sim:", device_, ": ", call,
                 ": expected a live stream, but stream ", serial_, " was destroyed");
  if (!worker_.joinable()) worker_ = std::thread([this] { run(); });
  op.seq = ++enqueued_;
  queue_.push_back(std::move(op));
  enqueued_hint_.store(enqueued_, std::memory_order_release);
  // Only a sleeping worker needs the (syscall-costly) notification.
  if (worker_idle_) work_cv_.notify_one();
  return enqueued_;
}

uint64_t SimStream::tail() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return enqueued_;
}

uint64_t SimStream::pending() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return enqueued_ - completed_.load(std::memory_order_acquire);
}

void SimStream::wait(uint64_t seq) const {
  if (done(seq)) return;
  // A worker waiting for another stream sleeps at once: with two cores, a third spinning
  // thread would slow the very stream it waits for.
  if (!tls_on_worker && spin_until([&] { return done(seq); })) return;
  std::unique_lock<std::mutex> lock(mutex_);
  ++done_waiters_;
  done_cv_.wait(lock, [&] { return completed_.load(std::memory_order_acquire) >= seq; });
  --done_waiters_;
}

void SimStream::synchronize(const char* call) {
  drain();
  std::string error;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    error.swap(error_);
  }
  FERRY_CHECK_AS(DeviceError, error.empty(), "sim:", device_, ": ", call, ": stream ", serial_,
                 ": ", error);
}

void SimStream::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    work_cv_.notify_one();
    // An idle worker may be spinning on the hint rather than waiting on the condition: move the
    // hint too, so that it stops at once instead of after its spin.
    enqueued_hint_.fetch_add(1, std::memory_order_release);
    // A host function stopping its own stream: the worker finishes the queue after it returns.
    if (worker_.joinable() && worker_.get_id() == std::this_thread::get_id()) return;
  }
  // No enqueue starts a worker once stop_ is set, so worker_ no longer changes; the second of
  // two concurrent shutdowns waits here until the first has joined it.
  std::lock_guard<std::mutex> join_lock(join_mutex_);
  if (worker_.joinable()) worker_.join();
}

void SimStream::run() {
  tls_on_worker = true;
  // The pool's CPUs, not the one an OpenMP binding gave the thread that started this one.
  ferry::detail::use_pool_cpus();
  // Thread names are limited to 15 characters.
  const std::string name =
      ("sim" + std::to_string(device_) + "-stream" + std::to_string(serial_)).substr(0, 15);
  ::pthread_setname_np(::pthread_self(), name.c_str());

  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (queue_.empty() && !stop_) {
      // Work often follows work (a copy, then its event): look for it a little before sleeping.
      const uint64_t seen = enqueued_;
      lock.unlock();
      spin_until([&] { return enqueued_hint_.load(std::memory_order_acquire) != seen; });
      lock.lock();
    }
    while (queue_.empty() && !stop_) {
      worker_idle_ = true;
      work_cv_.wait(lock);
    }
    worker_idle_ = false;
    if (queue_.empty()) return;  // stopped and drained
    SimOp op = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();

    execute(op);
    const uint64_t seq = op.seq;
    op = SimOp();  // release captures and references before reporting completion

    lock.lock();
    completed_.store(seq, std::memory_order_release);
    if (done_waiters_ > 0) done_cv_.notify_all();
  }
}

void SimStream::chaos_delay() {
  if (!knobs_.chaos.load(std::memory_order_relaxed)) return;
  const uint64_t generation = knobs_.chaos_generation.load(std::memory_order_relaxed);
  if (generation != rng_generation_) {
    // Each stream draws from its own sequence so that a seed replays the same delays per stream.
    rng_.seed(knobs_.chaos_seed.load(std::memory_order_relaxed) ^
              (0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(serial_ + 1)));
    rng_generation_ = generation;
  }
  const uint64_t draw = rng_();
  if ((draw & 1) == 0) return;
  const int64_t max_ns = knobs_.chaos_max_delay_ns.load(std::memory_order_relaxed);
  if (max_ns <= 0) return;
  const auto delay =
      std::chrono::nanoseconds(static_cast<int64_t>((draw >> 1) % static_cast<uint64_t>(max_ns)));
  std::this_thread::sleep_for(delay);
}

void SimStream::execute(SimOp& op) {
  chaos_delay();
  const bool hide = knobs_.hide_device_memory.load(std::memory_order_relaxed);
  switch (op.kind) {
    case SimOp::Kind::kCopy:
    case SimOp::Kind::kFill: {
      const auto start = Clock::now();
      if (op.kind == SimOp::Kind::kCopy && !op.batch.empty()) {
        for (const CopyRange& r : op.batch) {
          sim_memcpy(r.dst, r.src, r.nbytes, op.device_sides, hide);
        }
      } else if (op.kind == SimOp::Kind::kCopy) {
        sim_memcpy(op.dst, op.src, op.nbytes, op.device_sides, hide);
      } else {
        sim_memset(op.dst, op.value, op.nbytes, hide);
      }
      // Stand in for a slower link: the copy takes at least its simulated time.
      const auto left = op.cost - (Clock::now() - start);
      if (left.count() > 0) std::this_thread::sleep_for(left);
      break;
    }
    case SimOp::Kind::kMark: {
      std::lock_guard<std::mutex> lock(op.event->mutex);
      if (op.event->seq == op.seq && op.event->stream.get() == this) {
        op.event->time = Clock::now();
        op.event->stamped_seq = op.seq;
      }
      break;
    }
    case SimOp::Kind::kWait:
      op.wait_for->wait(op.wait_seq);
      break;
    case SimOp::Kind::kSignal:
      op.shared_event->complete(op.wait_seq);
      break;
    case SimOp::Kind::kWaitShared:
      // A recorder that died with the record pending: the wait ends, and the stream's next
      // synchronize reports why.
      try {
        op.shared_event->wait(op.wait_seq, "stream_wait_event");
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (error_.empty()) error_ = e.what();
      }
      break;
    case SimOp::Kind::kHost:
      try {
        op.host();
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (error_.empty()) error_ = std::string("a host function raised: ") + e.what();
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (error_.empty()) error_ = "a host function raised a non-standard exception";
      }
      break;
  }
}

}  // namespace ferry::sim::detail
