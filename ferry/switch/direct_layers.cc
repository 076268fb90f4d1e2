// Binding direct layers to the mapped image, and the byte ranges a group copies (see
// direct_layers.h).
#include "ferry/switch/direct_layers.h"

#include <algorithm>
#include <limits>

#include "ferry/core/error.h"
#include "ferry/core/memory_format.h"
#include "ferry/device/host_mapping.h"

namespace ferry::switch_ {
namespace {

// A storage over bytes [offset, offset + nbytes) of `mapped`'s storage that keeps it alive.
Storage mapped_view_storage(const Tensor& mapped, size_t offset, size_t nbytes) {
  auto* keep = new Storage(mapped.storage());
  return Storage(DataPtr(
                     static_cast<std::byte*>(mapped.data_ptr()) + offset, keep,
                     [](void* context) { delete static_cast<Storage*>(context); }, mapped.device()),
                 nbytes);
}

}  // namespace

Tensor map_image(const ModelImage& image, Device device) {
  return map_host_memory(image.host(), device);
}

void bind_direct(const ModelImage& image, const Tensor& mapped, const std::vector<bool>& direct) {
  FERRY_CHECK(direct.size() == image.layer_count(), "bind_direct: expected one flag per layer (",
              image.layer_count(), "), got ", direct.size());
  if (std::none_of(direct.begin(), direct.end(), [](bool d) { return d; })) return;
  FERRY_CHECK(mapped.defined(),
              "bind_direct: expected the image mapped into a device, got an undefined tensor");
  FERRY_CHECK(!mapped.is_cpu() && mapped.dtype() == kUInt8 &&
                  mapped.numel() == static_cast<int64_t>(image.nbytes()),
              "bind_direct: expected the image mapped into a device (uint8 [", image.nbytes(),
              "]), got ", mapped.dtype(), " ", mapped.sizes(), " on ", mapped.device());
  for (const ImageTensor& entry : image.tensors()) {
    for (size_t layer = 0; layer < direct.size(); ++layer) {
      if (!direct[layer] || entry.offset < image.layer_begin(layer) ||
          entry.offset >= image.layer_end(layer)) {
        continue;
      }
      entry.tensor.set_data(make_tensor(mapped_view_storage(mapped, entry.offset, entry.nbytes),
                                        entry.dtype, entry.sizes, contiguous_strides(entry.sizes)));
      break;
    }
  }
}

std::vector<std::pair<size_t, size_t>> group_copy_ranges(const ModelImage& image, size_t first,
                                                         size_t end_layer,
                                                         const std::vector<bool>* direct) {
  std::vector<std::pair<size_t, size_t>> ranges;
  const auto is_direct = [&](size_t i) {
    return direct != nullptr && !direct->empty() && (*direct)[i];
  };
  for (size_t i = first; i < end_layer;) {
    if (is_direct(i)) {
      ++i;
      continue;
    }
    const size_t begin = image.layer_begin(i);
    size_t end = image.layer_end(i);
    for (++i; i < end_layer && !is_direct(i); ++i) end = image.layer_end(i);
    if (end > begin) ranges.emplace_back(begin, end);
  }
  return ranges;
}

std::vector<double> direct_extra_costs(std::span<const LayerCost> resident,
                                       std::span<const LayerCost> direct) {
  FERRY_CHECK(resident.size() == direct.size(),
              "direct_extra_costs: expected two profiles of the same layers, got ", resident.size(),
              " and ", direct.size(), " layers");
  std::vector<double> extra;
  for (size_t i = 0; i < resident.size(); ++i) {
    extra.push_back(resident[i].bytes == 0
                        ? std::numeric_limits<double>::infinity()
                        : std::max(0.0, direct[i].compute_s - resident[i].compute_s));
  }
  return extra;
}

std::vector<double> profile_direct_extra(const ModelImage& image, const Tensor& mapped,
                                         const std::vector<SwitchLayer>& layers,
                                         const Tensor& input, const LinkProfile& link,
                                         std::span<const LayerCost> resident, int repeats) {
  std::vector<bool> all(image.layer_count());
  for (size_t i = 0; i < all.size(); ++i) all[i] = image.layer_end(i) > image.layer_begin(i);
  bind_direct(image, mapped, all);
  const std::vector<LayerCost> direct = profile_layers(layers, input, link, repeats);
  std::vector<double> extra = direct_extra_costs(resident, direct);
  for (size_t i = 0; i < extra.size(); ++i) {
    if (!all[i]) extra[i] = std::numeric_limits<double>::infinity();
  }
  return extra;
}

}  // namespace ferry::switch_
