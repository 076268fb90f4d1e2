// FERRY_ALLOC_CONF: the caching device allocator's settings, e.g.
// "max_split_size_mb:128,garbage_collection_threshold:0.8". Read from the environment once, at the
// allocator's first use; set_alloc_conf replaces them at run time (tests, tools).
// Invariants: the settings in effect are always valid; a bad string raises and changes nothing;
// a reader sees each update whole, never one field of it with another of the one before.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ferry::memory {

struct AllocConfig {
  // max_split_size_mb: blocks of at least this many bytes are never split, and requests below it
  // never take them (they are kept whole for large requests). SIZE_MAX (the default) means no
  // limit. Must be more than 20 MiB (the large segment size), as in PyTorch.
  size_t max_split_size = SIZE_MAX;
  // garbage_collection_threshold: in (0, 1); 0 (the default) turns it off. Before a new segment
  // would take the device's reserved memory above threshold * capacity (the memory-fraction cap,
  // or the device's total memory), the allocator releases cached segments that are entirely
  // free, least recently used first.
  double garbage_collection_threshold = 0.0;

  // Parses "key:value,key:value" (spaces around items allowed; an empty string gives the
  // defaults). Raises ferry::Error naming the key and the value on an unknown key, a malformed
  // item or an out-of-range value.
  static AllocConfig parse(std::string_view text);
  // The settings as FERRY_ALLOC_CONF would spell them ("" for the defaults).
  std::string str() const;

  friend bool operator==(const AllocConfig&, const AllocConfig&) = default;
};

// The settings in effect (FERRY_ALLOC_CONF's, read on the first call, until replaced).
AllocConfig alloc_config();
// Parses `text` as FERRY_ALLOC_CONF and puts it in effect for later allocations; raises on a bad
// string, keeping the current settings. Returns the previous settings.
AllocConfig set_alloc_conf(std::string_view text);
AllocConfig set_alloc_config(const AllocConfig& config);

}  // namespace ferry::memory
