// The pipeline benchmark behind `ferry bench-pipeline` (docs/pipeline.md, "Performance"): GPipe
// on sim devices whose kernels take the time FERRY_SIM_COMPUTE's model says (the host has too few
// cores to measure 8 stages otherwise), against the ideal utilization m / (m + n - 1); the cost
// of copies on a slow link (how much of their time hides behind compute); two stages with real
// compute at once; a text Gantt chart of one run, and optionally its Chrome trace and the results
// as JSON (one {"case": ...} record per throughput row, then the other parts' figures). Files
// named by the options are opened before anything runs.
#pragma once

#include <string>

namespace ferry::bench {

struct PipelineOptions {
  std::string compute = "50G";     // modelled FLOP/s (FERRY_SIM_COMPUTE's format)
  std::string bandwidth = "12G";   // the PCIe-like link for the throughput table
  std::string slow_link = "100M";  // the link of the copy-overlap case
  int repeat = 3;                  // timed steps per case (median), after one warm-up
  int width = 96;                  // columns of the Gantt chart
  std::string trace;               // Chrome-trace JSON of the Gantt run ("" = none)
  std::string timeline_checkpoint = "except_last";  // the Gantt run's checkpoint mode
  int timeline_stages = 4;                          // the Gantt run's stages (8 chunks)
  std::string json;    // the results as JSON too ("-": on stdout, with the tables on stderr)
  bool quick = false;  // fewer, smaller cases: a smoke test
  std::string* json_text = nullptr;   // when set, also receives the JSON text (for --plot)
  std::string* trace_text = nullptr;  // when set, receives the Chrome trace (for --timeline)
};

// Runs the benchmark, prints the tables and the timeline; returns the process exit code (1 when
// a target is missed, never with --quick).
int run_pipeline_bench(const PipelineOptions& options);

}  // namespace ferry::bench
