// `ferry switch-cold-start`: the process bench-switch starts for its stop-and-start baseline
// (bench/cold_start.h): build a zoo model, load its weights from a safetensors file into a
// device, run it once. Registered only with the benchmarks (FERRY_BUILD_BENCH=ON).
#if defined(FERRY_HAVE_BENCH)

#include <memory>

#include "bench/cold_start.h"
#include "tools/command.h"

namespace ferry::tools {
namespace {

FERRY_REGISTER_COMMAND(
    "switch-cold-start",
    "bench-switch's stop-and-start process: build a zoo model, load its weights (safetensors) "
    "into a device and run it once; prints the phases' milliseconds as JSON",
    [](CLI::App& sub) -> std::function<int()> {
      auto options = std::make_shared<bench::ColdStartOptions>();
      sub.add_option("--arch", options->arch, "Architecture (resnet18/34/50/101/152, bert-base)")
          ->required();
      sub.add_option("--weights", options->weights, "Safetensors file with the state_dict")
          ->required()
          ->check(CLI::ExistingFile);
      sub.add_option("--device", options->device, "Device to load into and run on")
          ->capture_default_str();
      sub.add_option("--batch", options->batch, "Batch of the example input")
          ->check(CLI::PositiveNumber)
          ->capture_default_str();
      return [options] { return bench::run_cold_start(*options); };
    });

}  // namespace
}  // namespace ferry::tools

#endif  // FERRY_HAVE_BENCH
