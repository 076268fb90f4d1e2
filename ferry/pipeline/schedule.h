// The GPipe schedule (torchgpipe's clock_cycles): at clock k = 0 .. m+n-2, micro-batch i runs
// on partition j for every pair with i + j = k, 0 <= i < m, 0 <= j < n, listed by increasing j.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace ferry::pipeline {

// (micro-batch, partition)
using Cell = std::pair<int64_t, int64_t>;

// Raises Error when m < 1 or n < 1.
std::vector<std::vector<Cell>> clock_cycles(int64_t m, int64_t n);

}  // namespace ferry::pipeline
