// libFuzzer target for the safetensors reader (built with -DFERRY_FUZZ=ON and clang; see
// docs/nn.md, "Fuzzing"). Each input is a whole file image. The reader must either raise a
// ferry::Error or return a header whose tensors tile the bytes after the header; for the latter,
// the writer's header for the same tensors and metadata must parse back to the same header.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "ferry/core/error.h"
#include "ferry/nn/safetensors_format.h"

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace st = ferry::safetensors;
  const std::string_view image(reinterpret_cast<const char*>(data), size);
  st::Header header;
  try {
    header = st::parse_file_image(image, "fuzz");
  } catch (const ferry::Error&) {
    return 0;
  }
  uint64_t at = 0;
  for (const st::TensorInfo& t : header.tensors) {
    check(t.begin == at && t.end >= t.begin);
    at = t.end;
  }
  check(at == header.data_bytes && header.data_offset + header.data_bytes == size);
  // The writer's header for what was read parses back to the same tensors.
  const std::string rebuilt = st::build_header(header.tensors, header.metadata) +
                              std::string(image.substr(header.data_offset));
  const st::Header again = st::parse_file_image(rebuilt, "rebuilt");
  check(again.tensors.size() == header.tensors.size() && again.metadata == header.metadata);
  for (size_t i = 0; i < again.tensors.size(); ++i) {
    check(again.tensors[i].name == header.tensors[i].name &&
          again.tensors[i].dtype == header.tensors[i].dtype &&
          again.tensors[i].shape == header.tensors[i].shape &&
          again.tensors[i].begin == header.tensors[i].begin);
  }
  return 0;
}
