// clock_cycles (see schedule.h).
#include "ferry/pipeline/schedule.h"

#include <algorithm>

#include "ferry/core/error.h"

namespace ferry::pipeline {

std::vector<std::vector<Cell>> clock_cycles(int64_t m, int64_t n) {
  FERRY_CHECK(m >= 1 && n >= 1, "clock_cycles: expected m >= 1 micro-batches and n >= 1 ",
              "partitions, but got m = ", m, ", n = ", n);
  std::vector<std::vector<Cell>> cycles;
  for (int64_t k = 0; k < m + n - 1; ++k) {
    std::vector<Cell> cycle;
    for (int64_t j = std::max<int64_t>(0, k - m + 1); j <= std::min(k, n - 1); ++j) {
      cycle.emplace_back(k - j, j);
    }
    cycles.push_back(std::move(cycle));
  }
  return cycles;
}

}  // namespace ferry::pipeline
