// A load test against a ferry server: K client connections send N requests in all, each for a
// model drawn from a list, Zipf-distributed (rank r of the list with probability proportional to
// 1 / r^s; s = 0 is uniform), from a seeded generator, so a run's sequence of models replays
// exactly from its seed. Reports the latency percentiles, throughput, failures and how many
// requests went to each model. Used by `ferry client --load` and `ferry bench-serve`.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ferry/switch/client.h"
#include "ferry/switch/types.h"

namespace ferry::switch_ {

// Draws ranks 0..n-1 with P(r) proportional to 1 / (r + 1)^exponent.
class ZipfSampler {
 public:
  // Raises ferry::Error for n == 0 or a negative or non-finite exponent.
  ZipfSampler(size_t n, double exponent);
  size_t operator()(std::mt19937_64& rng) const;
  double probability(size_t rank) const;

 private:
  std::vector<double> cumulative_;
};

struct LoadSpec {
  std::vector<std::string> models;               // drawn by ZipfSampler over this order
  std::vector<std::vector<NamedTensor>> inputs;  // per model, or one list for every model
  int64_t requests = 0;
  int clients = 1;
  double zipf = 0;
  uint64_t seed = 0;
  uint32_t deadline_ms = 0;
};

struct LoadReport {
  int64_t ok = 0, failed = 0;
  double p50_ms = 0, p99_ms = 0, requests_per_s = 0, seconds = 0;
  std::vector<int64_t> per_model;  // requests answered, by LoadSpec::models' order
  std::string first_error;
};

// Runs the load: each client thread opens a connection with `connect` and takes requests from
// the shared count; request i's model is the i-th draw of one generator seeded with `seed`.
// Raises ferry::Error for an empty model list, a bad client count or inputs of the wrong count.
LoadReport run_load(const LoadSpec& spec, const std::function<std::unique_ptr<Client>()>& connect);

}  // namespace ferry::switch_
