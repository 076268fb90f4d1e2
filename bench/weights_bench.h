// `ferry bench-weights`: a model's weights fetched from another controller over ferry/transport
// (ferry/switch/weight_share.h) against loading them from the local safetensors file, for one
// model-zoo architecture. The holder is a `ferry serve --in-process --share-weights` child of
// this process; the fetches run here, once per UCX transport (shared memory, loopback TCP).
// Each figure is the median of --repeat runs: the local load with the file in the page cache
// and with it evicted (posix_fadvise DONTNEED after an fsync), the connection to the directory,
// the fetch alone (request to verified bytes in pinned memory) and the whole model built over
// fetched bytes.
// Guarantees: the holder is killed when this process ends or fails (PR_SET_PDEATHSIG), every
// wait is bounded by --timeout, and the fetched image is checked byte for byte against the local
// one before any figure is printed.
#pragma once

#include <string>
#include <vector>

namespace ferry::bench {

struct WeightsBenchOptions {
  std::string arch = "resnet50";
  std::vector<std::string> tls = {"shm", "tcp"};
  int repeat = 5;
  int timeout_s = 120;
};

int run_weights_bench(const WeightsBenchOptions& options);

}  // namespace ferry::bench
