// Zipf-distributed load over several models (see load_generator.h).
#include "ferry/switch/load_generator.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <thread>

#include "ferry/core/error.h"

namespace ferry::switch_ {

ZipfSampler::ZipfSampler(size_t n, double exponent) {
  FERRY_CHECK(n > 0, "ZipfSampler: expected at least one item, got none");
  FERRY_CHECK(std::isfinite(exponent) && exponent >= 0,
              "ZipfSampler: expected a finite exponent >= 0, got ", exponent);
  double total = 0;
  for (size_t r = 0; r < n; ++r) {
    total += 1.0 / std::pow(static_cast<double>(r + 1), exponent);
    cumulative_.push_back(total);
  }
  for (double& c : cumulative_) c /= total;
  cumulative_.back() = 1.0;
}

size_t ZipfSampler::operator()(std::mt19937_64& rng) const {
  const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  const auto it = std::upper_bound(cumulative_.begin(), cumulative_.end(), u);
  return std::min(static_cast<size_t>(it - cumulative_.begin()), cumulative_.size() - 1);
}

double ZipfSampler::probability(size_t rank) const {
  return cumulative_.at(rank) - (rank == 0 ? 0.0 : cumulative_[rank - 1]);
}

LoadReport run_load(const LoadSpec& spec, const std::function<std::unique_ptr<Client>()>& connect) {
  FERRY_CHECK(!spec.models.empty(), "load: expected at least one model, got none");
  FERRY_CHECK(spec.clients >= 1 && spec.clients <= 1024, "load: expected 1 to 1024 clients, got ",
              spec.clients);
  FERRY_CHECK(spec.inputs.size() == 1 || spec.inputs.size() == spec.models.size(),
              "load: expected one input list for every model or one per model (",
              spec.models.size(), "), got ", spec.inputs.size());
  const ZipfSampler sampler(spec.models.size(), spec.zipf);
  std::vector<size_t> order;
  std::mt19937_64 rng(spec.seed);
  for (int64_t i = 0; i < spec.requests; ++i) order.push_back(sampler(rng));

  using LoadClock = std::chrono::steady_clock;
  std::atomic<int64_t> next{0};
  std::mutex mutex;
  LoadReport report;
  report.per_model.assign(spec.models.size(), 0);
  std::vector<double> latencies;
  const auto fail = [&](const std::string& what) {
    std::lock_guard lock(mutex);
    ++report.failed;
    if (report.first_error.empty()) report.first_error = what;
  };
  const auto start = LoadClock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < spec.clients; ++c) {
    threads.emplace_back([&] {
      try {
        const std::unique_ptr<Client> client = connect();
        for (int64_t i = next.fetch_add(1); i < spec.requests; i = next.fetch_add(1)) {
          const size_t m = order[static_cast<size_t>(i)];
          const auto t0 = LoadClock::now();
          try {
            client->infer(spec.models[m], spec.inputs[spec.inputs.size() == 1 ? 0 : m],
                          std::chrono::milliseconds(spec.deadline_ms));
            const double ms =
                std::chrono::duration<double, std::milli>(LoadClock::now() - t0).count();
            std::lock_guard lock(mutex);
            latencies.push_back(ms);
            ++report.per_model[m];
          } catch (const Error& e) {
            fail(e.what());
          }
        }
      } catch (const Error& e) {
        fail(e.what());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  report.seconds = std::chrono::duration<double>(LoadClock::now() - start).count();
  std::sort(latencies.begin(), latencies.end());
  const auto pct = [&](double p) {
    if (latencies.empty()) return 0.0;
    return latencies[std::min(latencies.size() - 1,
                              static_cast<size_t>(p * static_cast<double>(latencies.size())))];
  };
  report.ok = static_cast<int64_t>(latencies.size());
  report.p50_ms = pct(0.50);
  report.p99_ms = pct(0.99);
  report.requests_per_s = report.seconds > 0 ? static_cast<double>(report.ok) / report.seconds : 0;
  return report;
}

}  // namespace ferry::switch_
