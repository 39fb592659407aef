#include "nn/gpu_recorder.h"

#include <algorithm>
#include <cstdlib>

#include "api/clock.h"
#include "nn/tensor.h"

namespace sotto::nn {

namespace {
// Adds the time from its making to its end to `total` (ns; the project's clock, performance.now() in wasm).
struct HostTimer {
  explicit HostTimer(uint64_t& total) : total_(total), start_ms_(now_ms()) {}
  ~HostTimer() { total_ += static_cast<uint64_t>((now_ms() - start_ms_) * 1e6); }
  HostTimer(const HostTimer&) = delete;
  HostTimer& operator=(const HostTimer&) = delete;
  uint64_t& total_;
  double start_ms_;
};
}  // namespace

GpuRecorder::GpuRecorder(gpu::Device& device) : device_(device) {
  submit_every_ = 64;
#if !defined(__wasm__)
  if (const char* env = std::getenv("SOTTO_GPU_SUBMIT_EVERY"))
    submit_every_ = static_cast<size_t>(std::strtoul(env, nullptr, 10));
#endif
}

GpuRecorder::~GpuRecorder() {
  for (gpu::BufferHandle chunk : arena_) device_.destroy_buffer(chunk);
}

void GpuRecorder::fail(std::string message) {
  if (error_.empty()) error_ = std::move(message);
}

Status GpuRecorder::status() const {
  if (!error_.empty()) return error("nn/webgpu: ", error_);
  return {};
}

void GpuRecorder::dispatch(std::string_view name, std::string_view wgsl, std::span<const uint32_t> params,
                           std::initializer_list<const Tensor*> tensors, uint64_t threads) {
  if (failed() || threads == 0) return;
  {
    HostTimer timer(host_ns_);
    if (!record(name, wgsl, params, tensors, threads)) return;
  }
  if (submit_every_ > 0 && plan_.size() >= submit_every_) {
    if (Status s = flush(); !s.ok()) fail(s.message());
  }
}

bool GpuRecorder::record(std::string_view name, std::string_view wgsl, std::span<const uint32_t> params,
                         std::initializer_list<const Tensor*> tensors, uint64_t threads) {
  auto pipeline = pipelines_.find(name);
  if (pipeline == pipelines_.end()) {
    auto made = device_.create_pipeline(wgsl, "main", name);
    if (!made.ok()) {
      fail(cat("kernel ", name, ": ", made.message()));
      return false;
    }
    pipeline = pipelines_.emplace(std::string(name), *made).first;
  }
  // The block's slot(s): the next free ones in this submission, in one chunk.
  const uint64_t block_bytes = std::max<uint64_t>(16, (params.size() * 4 + 15) / 16 * 16);
  const uint64_t slot_bytes = (block_bytes + kSlotBytes - 1) / kSlotBytes * kSlotBytes;
  if (slot_bytes > kChunkBytes) {
    fail(cat("kernel ", name, ": a uniform block of ", block_bytes, " bytes (at most ", kChunkBytes, ")"));
    return false;
  }
  uint64_t at = staged_.size() * 4;
  if (at / kChunkBytes != (at + slot_bytes - 1) / kChunkBytes) at = (at / kChunkBytes + 1) * kChunkBytes;
  const size_t chunk = static_cast<size_t>(at / kChunkBytes);
  if (chunk == arena_.size()) {
    auto made = device_.create_buffer(kChunkBytes, gpu::kUsageUniform | gpu::kUsageCopyDst, "nn params");
    if (!made.ok()) {
      fail(made.message());
      return false;
    }
    arena_.push_back(*made);
  }
  staged_.resize(static_cast<size_t>((at + slot_bytes) / 4), 0);
  std::copy(params.begin(), params.end(), staged_.begin() + static_cast<std::ptrdiff_t>(at / 4));
  const uint64_t offset = at % kChunkBytes;
  std::vector<gpu::Binding> bindings = {{0, arena_[chunk], offset, block_bytes}};
  std::vector<uint64_t> key = {pipeline->second, arena_[chunk], offset, block_bytes};
  uint32_t slot = 1;
  for (const Tensor* t : tensors) {
    if (!t->defined() || t->gpu_buffer() == 0) {
      fail(cat("kernel ", name, ": an input has no GPU buffer"));
      return false;
    }
    const uint64_t bytes = t->gpu_binding_bytes(device_.info().limits.max_storage_buffer_binding_size);
    bindings.push_back({slot++, t->gpu_buffer(), t->gpu_offset(), bytes});
    key.push_back(t->gpu_buffer());
    key.push_back(t->gpu_offset());
    key.push_back(bytes);
  }
  auto group = bind_groups_.find(key);
  if (group == bind_groups_.end()) {
    auto made = device_.create_bind_group(pipeline->second, bindings);
    if (!made.ok()) {
      fail(cat("kernel ", name, ": ", made.message()));
      return false;
    }
    group = bind_groups_.emplace(key, *made).first;
  }
  const uint64_t groups = (threads + 63) / 64;
  gpu::Dispatch d;
  d.pipeline = pipeline->second;
  d.bind_group = group->second;
  d.groups_x = static_cast<uint32_t>(std::min<uint64_t>(groups, 65535));
  d.groups_y = static_cast<uint32_t>((groups + 65534) / 65535);
  plan_.push_back(d);
  plan_names_.push_back(&pipeline->first);
  return true;
}

Status GpuRecorder::flush() {
  SOTTO_TRY(status());
  if (plan_.empty()) return {};
  HostTimer timer(host_ns_);
  for (size_t chunk = 0; chunk * kChunkBytes < staged_.size() * 4; ++chunk) {
    const uint64_t begin = chunk * kChunkBytes;
    const uint64_t end = std::min<uint64_t>(staged_.size() * 4, begin + kChunkBytes);
    if (Status s = device_.write_buffer(arena_[chunk], 0, staged_.data() + begin / 4, end - begin); !s.ok()) {
      fail(s.message());
      return status();
    }
  }
  staged_.clear();
  std::vector<uint64_t> ns;
  Status s = profiling_ ? device_.run_timed(plan_, &ns) : device_.run(plan_);
  for (size_t i = 0; i < ns.size() && i < plan_names_.size(); ++i) {
    auto& [count, total] = profile_[*plan_names_[i]];
    count += 1;
    total += ns[i];
  }
  dispatches_run_ += plan_.size();
  flushes_ += 1;
  plan_.clear();
  plan_names_.clear();
  return s;
}

std::string GpuRecorder::profile() const {
  std::vector<std::pair<uint64_t, std::string>> rows;
  uint64_t all = 0;
  for (const auto& [name, v] : profile_) {
    rows.push_back({v.second, cat(name, ": ", v.first, " dispatches, ", v.second / 1000, " us")});
    all += v.second;
  }
  std::sort(rows.rbegin(), rows.rend());
  std::string out =
      cat("nn/webgpu profile: ", flushes_, " submissions, ", dispatches_run_, " dispatches, ", all / 1000,
          " us of GPU time, ", host_ns_ / 1000, " us on the host recording and encoding\n");
  for (const auto& r : rows) out += "  " + r.second + "\n";
  return out;
}

}  // namespace sotto::nn
