// Plan fusion (native only: it is checked by reading back synchronously, which only a native device can): a
// recorded plan's dispatches turned back into what gpu/fusion.h rewrites (each kernel's WGSL, its grid, what
// each binding holds), and the fused dispatch.
#include <algorithm>

#include "gpu/fusion.h"
#include "gpu/ops.h"

namespace sotto::gpu {

namespace {
// FNV-1a of a fused kernel's WGSL, for its pipeline's cache key (with its length).
uint64_t source_hash(std::string_view s) {
  uint64_t h = 14695981039346656037ull;
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  return h;
}
// Where `v` sits in `list`, or list.size(). (Not std::find: for 32-bit values libc++ calls wmemchr, which the
// wasm build's libc lacks.)
size_t index_of(const std::vector<BufferHandle>& list, BufferHandle v) {
  size_t i = 0;
  while (i < list.size() && list[i] != v) ++i;
  return i;
}
}  // namespace

Result<Dispatch> Ops::fuse(std::span<const Dispatch> dispatches, BufferHandle step, BufferHandle sync,
                           uint32_t slot, uint32_t grid, uint32_t* widest, uint32_t max_copy_words,
                           uint64_t* workgroup_bytes) {
  std::vector<FusionPhase> phases;
  std::vector<BufferHandle> roots;
  std::vector<uint32_t> offsets;  // each storage binding's word offset in its root, by offset slot
  for (const Dispatch& d : dispatches) {
    const auto source = sources_.find(d.pipeline);
    const auto bindings = dispatch_bindings_.find(d.bind_group);
    if (d.copy_bytes > 0 || source == sources_.end() || bindings == dispatch_bindings_.end() ||
        d.groups_z != 1)
      return error("webgpu: only dispatches Ops recorded can be fused");
    FusionPhase ph;
    ph.wgsl = source->second;
    ph.groups_x = d.groups_x;
    ph.groups_y = d.groups_y;
    for (const Binding& b : bindings->second) {
      FusionPhase::Bind bind;
      bind.binding = b.binding;
      if (index_of(step_buffers_, b.buffer) < step_buffers_.size()) {
        bind.kind = FusionPhase::Bind::Kind::Step;
      } else if (auto p = param_words_.find(param_key(b.buffer, b.offset)); p != param_words_.end()) {
        bind.kind = FusionPhase::Bind::Kind::Params;
        bind.params = p->second;
      } else {
        if (b.offset % 4) return error("webgpu: a binding at byte ", b.offset, " is not word aligned");
        const size_t root = index_of(roots, b.buffer);
        if (root == roots.size()) roots.push_back(b.buffer);
        bind.root = static_cast<uint32_t>(root);
        bind.offset_slot = static_cast<uint32_t>(offsets.size());
        bind.words = static_cast<uint32_t>(b.size / 4);
        offsets.push_back(static_cast<uint32_t>(b.offset / 4));
      }
      ph.bindings.push_back(std::move(bind));
    }
    phases.push_back(std::move(ph));
  }
  const AdapterLimits& limits = device_.info().limits;
  if (roots.size() + 1 > limits.max_storage_buffers_per_shader_stage)
    return error("webgpu: fusing these dispatches needs ", roots.size() + 1,
                 " storage buffers (the adapter has ", limits.max_storage_buffers_per_shader_stage, ")");
  SOTTO_ASSIGN(FusedKernel k, fuse_phases(phases, static_cast<uint32_t>(roots.size()),
                                          limits.max_compute_workgroup_storage_size, max_copy_words));
  SOTTO_ASSIGN(PipelineHandle p, pipeline(cat("fused_", source_hash(k.wgsl), "_", k.wgsl.size()), k.wgsl));
  std::vector<uint32_t> u = k.uniform;
  u[0] = slot;
  std::copy(offsets.begin(), offsets.end(), u.begin() + k.offsets_word);
  SOTTO_ASSIGN(Binding ub, params(1, u.data(), static_cast<uint32_t>(u.size() * 4)));
  std::vector<Binding> b = {{0, step, 0, 16}, ub, {2, sync}};
  for (size_t r = 0; r < roots.size(); ++r) b.push_back({static_cast<uint32_t>(3 + r), roots[r]});
  *widest = k.widest;
  if (workgroup_bytes) *workgroup_bytes = k.workgroup_bytes;
  std::vector<Dispatch> one;
  SOTTO_TRY(add(one, p, std::move(b), std::clamp<uint32_t>(grid, 1, k.widest)));
  return one[0];
}

}  // namespace sotto::gpu
