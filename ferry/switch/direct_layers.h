// Direct host access in a switch: the model image's pinned host buffer mapped into the device
// once (map_host_memory), the weights of "direct" layers bound to that mapping instead of to the
// device block, and the byte ranges a group then copies (its non-direct layers only).
// Guarantees: a direct layer's tensors keep their image offsets, dtypes and sizes (the mapping is
// the image itself), so a switch with direct layers computes on exactly the bytes a copy would
// have carried; nothing of a direct layer is copied.
#pragma once

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "ferry/core/device.h"
#include "ferry/core/tensor.h"
#include "ferry/switch/grouping.h"
#include "ferry/switch/model_image.h"
#include "ferry/switch/switch_profile.h"

namespace ferry::switch_ {

// What a switch needs to run some layers direct: the image mapped into the switch's device and a
// flag per layer. `mapped` must outlive the switch's work (the model keeps it).
struct DirectLayers {
  Tensor mapped;             // uint8 [image.nbytes()] on the device, over image.host()
  std::vector<bool> direct;  // one per layer; none set: a plain switch
};

// image.host() mapped into `device` (uint8 [image.nbytes()]). Raises as map_host_memory does
// (e.g. when the image is not in pinned or registered memory).
Tensor map_image(const ModelImage& image, Device device);

// Binds the tensors stored in the direct layers' byte ranges to `mapped` at their image offsets;
// the others keep their binding. Raises ferry::Error for a mapping of another size or a flag
// count other than the image's layer count.
void bind_direct(const ModelImage& image, const Tensor& mapped, const std::vector<bool>& direct);

// The image byte ranges [begin, end) that a group of layers [first, end_layer) copies: one per
// maximal run of non-direct layers holding bytes. `direct` null or empty: the group's whole range.
std::vector<std::pair<size_t, size_t>> group_copy_ranges(const ModelImage& image, size_t first,
                                                         size_t end_layer,
                                                         const std::vector<bool>* direct);

// What going direct adds to each layer's compute time: the layer's time measured with its
// weights in mapped host memory minus its resident time (never below 0), and infinity for a
// layer without weights (it cannot go direct). Both profiles are profile_layers' of the same
// layers.
std::vector<double> direct_extra_costs(std::span<const LayerCost> resident,
                                       std::span<const LayerCost> direct);

// Profiles `layers` (as profile_layers does, on `input`'s device) with every layer that holds
// image bytes bound to `mapped`, and returns direct_extra_costs against `resident` (infinity for a
// layer without image bytes). Leaves those layers bound to the mapping: rebind before running
// resident again (a switch rebinds).
std::vector<double> profile_direct_extra(const ModelImage& image, const Tensor& mapped,
                                         const std::vector<SwitchLayer>& layers,
                                         const Tensor& input, const LinkProfile& link,
                                         std::span<const LayerCost> resident, int repeats = 3);

}  // namespace ferry::switch_
