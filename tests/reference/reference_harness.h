// The harness of the PyTorch comparison: runs torch_reference.py once per process (Debian's
// /usr/bin/python3 as a separate process, into a temporary directory), then replays each case
// in ferry on a device and compares outputs, strides where asked, mutated inputs and input
// gradients with PyTorch's within the dtype's tolerance. Failures name the case and its seed.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "ferry/core/device.h"
#include "tests/reference/op_table.h"
#include "tests/support/safetensors.h"

namespace ferry::reference {

struct ReferenceRun {
  std::string skip_reason;  // why the comparison cannot run here (no python3, no torch)
  std::string failure;      // the script failed: its output
  std::string dir;          // the case files
  std::string command;      // how the files were made (to rerun by hand)
  nlohmann::json manifest;  // {"ops": [...], "cases": [{"name", "op", "file", "seed"}...]}

  // The manifest entries of operator `op`.
  std::vector<nlohmann::json> cases_of(const std::string& op) const;
};

// The script's run for this process (made on first use; the directory is removed at exit
// unless FERRY_REFERENCE_KEEP=1). Environment: FERRY_REFERENCE_SWEEP=N adds N random cases per
// operator; FERRY_REFERENCE_ONLY=op,op limits the script to those operators;
// FERRY_REQUIRE_TORCH=1 turns a missing python3 or torch into a failure (CI sets it).
const ReferenceRun& reference_run();

enum class Mode { kCpu, kSim, kSimChaos };
const char* mode_name(Mode mode);
void PrintTo(Mode mode, std::ostream* out);  // for GoogleTest's parameter names

struct CaseResult {
  std::string label;                  // the case, its seed, the device, how to replay it
  std::vector<std::string> failures;  // every difference from PyTorch, one message each
  std::string missing_kernel;         // set when a kernel this build lacks stopped the case
};

// Runs one case (a manifest entry) in ferry and compares it with PyTorch's results.
CaseResult check_case(const ReferenceRun& run, const nlohmann::json& entry, const OpEntry& op,
                      Mode mode);

struct KnownDifference {
  std::string pattern;  // a case name, or "op/*" for every case of op
  std::string mode;     // "" every mode, "cpu", or "sim" (with and without chaos)
  std::string text;     // every failure of the case contains it
  std::string why;
};

// The entry of known_differences.cc that case `name` falls under on `mode`, or nullptr.
const KnownDifference* known_difference(const std::string& name, Mode mode);

}  // namespace ferry::reference
