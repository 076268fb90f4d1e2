// The endpoint's registration cache: pinned blocks registered with UCX (ucp_mem_map) once and
// handed to every transfer from or into them (UCP_OP_ATTR_FIELD_MEMH), so that repeated sends of
// pool memory (pinned tensors, the staging of device tensors, pinned landings) do not register
// again; a registration is dropped when the pinned allocator gives its block back to the backend
// (a release hook), never while a transfer uses it (a block in use is not free, so never given
// back).
#include "ferry/memory/pinned_allocator.h"
#include "ferry/transport/endpoint_state.h"

namespace ferry::transport::detail {

ucp_mem_h EndpointState::registration_locked(const Tensor& t) {
  if (!t.defined() || !t.is_cpu() || closed_) return nullptr;
  const std::optional<memory::PinnedBlockRange> block = memory::pinned_block_of(t.storage());
  if (!block) return nullptr;
  if (auto it = registrations_.find(block->ptr); it != registrations_.end()) {
    ++registration_stats_.reused;
    return it->second.memh;
  }
  ucp_mem_map_params_t params{};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                      UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
  params.address = block->ptr;
  params.length = block->size;
  params.memory_type = UCS_MEMORY_TYPE_HOST;
  ucp_mem_h memh = nullptr;
  if (ucp_mem_map(context_, &params, &memh) != UCS_OK) {
    ++registration_stats_.failed;  // UCX registers (or copies) by itself, as for any memory
    return nullptr;
  }
  registrations_.emplace(block->ptr, Registration{block->size, memh});
  ++registration_stats_.registered;
  return memh;
}

void EndpointState::release_registration(const void* block) {
  std::lock_guard<std::mutex> lock(mutex);
  if (closed_) return;
  auto it = registrations_.find(block);
  if (it == registrations_.end()) return;
  ucp_mem_unmap(context_, it->second.memh);
  registrations_.erase(it);
  ++registration_stats_.released;
}

void EndpointState::unmap_all_registrations_locked() {
  for (const auto& [block, registration] : registrations_) {
    ucp_mem_unmap(context_, registration.memh);
  }
  registrations_.clear();
}

RegistrationStats EndpointState::registration_stats() const {
  std::lock_guard<std::mutex> lock(mutex);
  RegistrationStats stats = registration_stats_;
  stats.live = registrations_.size();
  return stats;
}

}  // namespace ferry::transport::detail
