// A model's weights laid out for switching: every parameter and buffer of its switch layers, in
// layer order, each at a 512-byte aligned offset of one pinned host buffer (PipeSwitch pads each
// tensor to 512 bytes too). A group of consecutive layers is then one contiguous byte range: one
// copy per group, whatever the number of tensors in it.
//
// Building an image moves the model's weights into it: afterwards each weight (the same tensor
// object, as Module::to keeps it) is a view of the pinned buffer, so the host holds one copy.
// bind_device makes them views of a device block with the same layout instead; bind_host goes
// back. A tensor shared by two layers is stored once, with the first layer that uses it.
//
// The host buffer may also be memory another process filled (a SharedHostBuffer that worker
// processes map): `adopt` lays the same layers out over such bytes without copying, after
// checking the layout's fingerprint, so N processes hold the weights once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "ferry/core/scalar_type.h"
#include "ferry/core/small_vector.h"
#include "ferry/core/tensor.h"
#include "ferry/switch/switch_layers.h"

namespace ferry::switch_ {

inline constexpr size_t kImageAlignment = 512;

struct ImageTensor {
  Tensor tensor;  // the module's own tensor object (rebound by bind_host / bind_device)
  size_t offset = 0;
  size_t nbytes = 0;
  ScalarType dtype = kFloat32;
  DimVector sizes;  // contiguous in the image
};

class ModelImage {
 public:
  // Copies the weights of `layers` (from wherever they are) into a new pinned buffer and binds
  // the module's tensors to it. Runs without autograd; raises ferry::Error when pinned memory
  // cannot be had.
  explicit ModelImage(const std::vector<SwitchLayer>& layers);
  // Lays `layers` out over `host` (uint8 [nbytes()] of pinned or registered host memory, kept
  // alive by the tensor), whose bytes already hold the weights in this layout (another process's
  // image of the same model), and binds the module's tensors to it without copying. Raises
  // ferry::Error when the size or `fingerprint` differs from this model's layout.
  static std::unique_ptr<ModelImage> adopt(const std::vector<SwitchLayer>& layers,
                                           const Tensor& host, uint64_t fingerprint);

  // The byte count and fingerprint an image of `layers` would have, without building one.
  struct Layout {
    size_t nbytes = 0;
    uint64_t fingerprint = 0;
  };
  static Layout layout_of(const std::vector<SwitchLayer>& layers);

  // Copies the image into `host` (uint8 [nbytes()], pinned or registered host memory) and makes
  // it the image's buffer; the old buffer is released. For moving weights into shared memory.
  void relocate_host(const Tensor& host);

  size_t nbytes() const { return nbytes_; }
  size_t layer_count() const { return layer_begin_.size(); }
  // Bytes [layer_begin(i), layer_end(i)) hold layer i's tensors (empty for a weightless layer).
  size_t layer_begin(size_t layer) const { return layer_begin_.at(layer); }
  size_t layer_end(size_t layer) const { return layer_end_.at(layer); }
  const std::vector<ImageTensor>& tensors() const { return tensors_; }
  // The pinned buffer: uint8 [nbytes()].
  const Tensor& host() const { return host_; }
  // A hash of the layout (each tensor's offset, dtype and sizes): equal for two images of the
  // same architecture and configuration, in any process.
  uint64_t fingerprint() const;

  // Makes every weight a view of `block` (uint8 [nbytes()] on a device, or pinned host memory)
  // at its image offset. The values are whatever `block` holds: copying the image into it is the
  // caller's business, ordered by streams and events.
  void bind(const Tensor& block) const;
  void bind_host() const { bind(host_); }

 private:
  ModelImage() = default;
  // Computes the offsets of `layers`' weights (tensors_, layer_begin_/end_, nbytes_).
  void lay_out(const std::vector<SwitchLayer>& layers);
  void check_host_block(const Tensor& host, const char* what) const;

  Tensor host_;
  size_t nbytes_ = 0;
  std::vector<ImageTensor> tensors_;
  std::vector<size_t> layer_begin_, layer_end_;
};

}  // namespace ferry::switch_
