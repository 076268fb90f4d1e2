// Laying a model's weights out for switching (see model_image.h).
#include "ferry/switch/model_image.h"

#include <algorithm>
#include <unordered_set>

#include "ferry/autograd/grad_mode.h"
#include "ferry/core/error.h"
#include "ferry/memory/memory_resource.h"
#include "ferry/memory/pinned_allocator.h"
#include "ferry/ops/factories.h"

namespace ferry::switch_ {
namespace {

size_t align_up(size_t n) { return (n + kImageAlignment - 1) / kImageAlignment * kImageAlignment; }

DimVector contiguous_strides(const DimVector& sizes) {
  DimVector strides(sizes.size(), 1);
  for (size_t i = sizes.size(); i > 1; --i)
    strides[i - 2] = strides[i - 1] * std::max<int64_t>(sizes[i - 1], 1);
  return strides;
}

std::vector<Tensor> weights_of(const nn::Module& module) {
  std::vector<Tensor> out;
  for (const auto& item : module.named_parameters()) {
    if (item.value().defined()) out.push_back(item.value());
  }
  for (const auto& item : module.named_buffers()) {
    if (item.value().defined()) out.push_back(item.value());
  }
  return out;
}

// A storage for bytes [offset, offset + nbytes) of the host block `host`: a pinned-allocator view
// (so copies record on the block) for the allocator's blocks, else a view that keeps the foreign
// block (registered shared memory) alive.
Storage host_view_storage(const Tensor& host, size_t offset, size_t nbytes) {
  if (host.storage().allocator() == memory::pinned_host_allocator()) {
    return memory::pinned_view_storage(host.storage(), offset, nbytes);
  }
  auto* keep = new Storage(host.storage());
  return Storage(DataPtr(
                     static_cast<std::byte*>(host.storage().data()) + offset, keep,
                     [](void* context) { delete static_cast<Storage*>(context); }, Device(kCPU)),
                 nbytes);
}

}  // namespace

void ModelImage::lay_out(const std::vector<SwitchLayer>& layers) {
  std::unordered_set<const TensorImpl*> seen;
  size_t cursor = 0;
  for (const SwitchLayer& layer : layers) {
    FERRY_CHECK(layer.module != nullptr, "ModelImage: layer '", layer.name, "' has no module");
    layer_begin_.push_back(cursor);
    bool first = true;
    for (const Tensor& t : weights_of(*layer.module)) {
      if (!seen.insert(t.impl()).second) continue;
      ImageTensor entry;
      entry.tensor = t;
      entry.offset = align_up(cursor);
      entry.nbytes = t.nbytes();
      entry.dtype = t.dtype();
      entry.sizes = DimVector(t.sizes().begin(), t.sizes().end());
      if (first) layer_begin_.back() = entry.offset;
      first = false;
      cursor = entry.offset + entry.nbytes;
      tensors_.push_back(std::move(entry));
    }
    layer_end_.push_back(std::max(cursor, layer_begin_.back()));
  }
  nbytes_ = cursor;
}

ModelImage::ModelImage(const std::vector<SwitchLayer>& layers) {
  lay_out(layers);
  if (nbytes_ == 0) return;
  host_ = empty({static_cast<int64_t>(nbytes_)}, TensorOptions().dtype(kUInt8).pinned_memory(true));
  NoGradGuard no_grad;
  for (const ImageTensor& entry : tensors_) {
    Tensor slot = make_tensor(host_view_storage(host_, entry.offset, entry.nbytes), entry.dtype,
                              entry.sizes, contiguous_strides(entry.sizes));
    slot.copy_(entry.tensor);
    entry.tensor.set_data(slot);
  }
}

std::unique_ptr<ModelImage> ModelImage::adopt(const std::vector<SwitchLayer>& layers,
                                              const Tensor& host, uint64_t fingerprint) {
  std::unique_ptr<ModelImage> image(new ModelImage());
  image->lay_out(layers);
  if (image->nbytes_ == 0) return image;
  image->check_host_block(host, "ModelImage::adopt");
  FERRY_CHECK(image->fingerprint() == fingerprint,
              "ModelImage::adopt: expected bytes laid out as this model's ", image->tensors_.size(),
              " weights (layout fingerprint ", image->fingerprint(),
              "), but the buffer's layout has fingerprint ", fingerprint,
              ": another architecture or configuration");
  image->host_ = host;
  image->bind_host();
  return image;
}

ModelImage::Layout ModelImage::layout_of(const std::vector<SwitchLayer>& layers) {
  ModelImage image;
  image.lay_out(layers);
  return {image.nbytes_, image.fingerprint()};
}

void ModelImage::relocate_host(const Tensor& host) {
  if (nbytes_ == 0) return;
  check_host_block(host, "ModelImage::relocate_host");
  Tensor target = host;
  target.copy_(host_);
  host_ = target;
  bind_host();
}

uint64_t ModelImage::fingerprint() const {
  // FNV-1a over each tensor's offset, dtype and sizes.
  uint64_t hash = 1469598103934665603ull;
  const auto mix = [&](uint64_t value) {
    for (int byte = 0; byte < 8; ++byte) {
      hash ^= (value >> (8 * byte)) & 0xff;
      hash *= 1099511628211ull;
    }
  };
  mix(nbytes_);
  for (const ImageTensor& entry : tensors_) {
    mix(entry.offset);
    mix(static_cast<uint64_t>(entry.dtype));
    mix(entry.sizes.size());
    for (int64_t size : entry.sizes) mix(static_cast<uint64_t>(size));
  }
  return hash;
}

void ModelImage::check_host_block(const Tensor& host, const char* what) const {
  FERRY_CHECK(host.defined() && host.is_cpu() && host.dtype() == kUInt8 && host.dim() == 1 &&
                  host.numel() == static_cast<int64_t>(nbytes_) && host.storage_offset() == 0,
              what, ": expected a whole uint8 host block of ", nbytes_, " bytes, got ",
              host.defined() ? detail::str_cat(host.device(), " ", host.dtype(), " ", host.sizes())
                             : std::string("an undefined tensor"));
  FERRY_CHECK(host.is_pinned(), what,
              ": expected pinned or registered host memory, got pageable host memory");
}

void ModelImage::bind(const Tensor& block) const {
  if (nbytes_ == 0) return;
  FERRY_CHECK(block.defined(), "ModelImage::bind: expected a uint8 block of ", nbytes_,
              " bytes, got an undefined tensor");
  FERRY_CHECK(block.dtype() == kUInt8 && block.dim() == 1 &&
                  block.numel() == static_cast<int64_t>(nbytes_) && block.storage_offset() == 0,
              "ModelImage::bind: expected a whole uint8 block of ", nbytes_, " bytes, got ",
              block.dtype(), " ", block.sizes(), " at storage offset ", block.storage_offset());
  const bool host = block.device().is_cpu();
  FERRY_CHECK(!host || block.is_pinned(),
              "ModelImage::bind: expected a device block or pinned host memory, got pageable host "
              "memory");
  for (const ImageTensor& entry : tensors_) {
    Storage storage =
        host ? host_view_storage(block, entry.offset, entry.nbytes)
             : memory::device_view_storage(block.storage(), entry.offset, entry.nbytes);
    entry.tensor.set_data(
        make_tensor(std::move(storage), entry.dtype, entry.sizes, contiguous_strides(entry.sizes)));
  }
}

}  // namespace ferry::switch_
