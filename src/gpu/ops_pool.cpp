// Ops' pools: views of one buffer, so that a fused dispatch (ops_fusion_native.cpp) or a layer kernel binds a
// few buffers, not twenty.
#include <algorithm>

#include "gpu/ops.h"

namespace sotto::gpu {

namespace {
constexpr uint64_t kViewAlign = 256;  // minStorageBufferOffsetAlignment everywhere we run

}  // namespace

Status Ops::begin_pool(uint64_t capacity, std::string_view label) {
  capacity = (capacity + kViewAlign - 1) / kViewAlign * kViewAlign;
  // Too large for one binding: no pool, the buffers stay apart (and the dispatches using them unfused).
  if (capacity > device_.info().limits.max_buffer_size || capacity > max_binding()) return {};
  SOTTO_ASSIGN(BufferHandle root,
               device_.create_buffer(capacity, kUsageStorage | kUsageCopySrc | kUsageCopyDst, label));
  owned_.push_back(root);
  pool_ = {root, 0, capacity};
  return {};
}

std::optional<BufferHandle> Ops::pool_view(uint64_t bytes) {
  const uint64_t size = (std::max<uint64_t>(bytes, 4) + kViewAlign - 1) / kViewAlign * kViewAlign;
  if (!pool_.root || pool_.used + size > pool_.capacity) return std::nullopt;
  views_.push_back({pool_.root, pool_.used, (bytes + 3) / 4 * 4});
  pool_.used += size;
  return static_cast<BufferHandle>(kViewBase + views_.size() - 1);
}

Binding Ops::resolve(Binding b) const {
  if (b.buffer < kViewBase || b.buffer - kViewBase >= views_.size()) return b;
  const View& v = views_[b.buffer - kViewBase];
  b.buffer = v.root;
  if (b.size == 0) b.size = v.bytes - b.offset;
  b.offset += v.offset;
  return b;
}

}  // namespace sotto::gpu
