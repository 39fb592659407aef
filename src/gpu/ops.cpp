// Recording GPU operations: pipelines (cached per kernel variant), parameter slices, bind groups, and the
// weight repacking that puts every quantized block on 32-bit word boundaries (layouts in gpu/kernels.cpp).
#include "gpu/ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <utility>

namespace sotto::gpu {

namespace {

constexpr uint64_t kParamChunkBytes = 64 * 1024;
constexpr uint32_t kParamAlign = 256;  // minUniformBufferOffsetAlignment everywhere we run
constexpr uint32_t kMaxGroups = 65535;

struct BlockLayout {
  int64_t elems;       // elements per block
  uint32_t src_bytes;  // bytes per block in GGUF
  uint32_t words;      // words per block on the GPU
};

bool layout_of(DType w, BlockLayout* out) {
  switch (w) {
    case DType::Q8_0:
      *out = {32, 34, 9};
      return true;
    case DType::Q4_0:
      *out = {32, 18, 5};
      return true;
    case DType::Q5_0:
      *out = {32, 22, 6};
      return true;
    case DType::Q4_K:
      *out = {256, 144, 36};
      return true;
    case DType::Q6_K:
      *out = {256, 210, 53};
      return true;
    default:
      return false;
  }
}

// One GGUF block -> its GPU words (the scale moved behind the quants where GGUF puts it first).
void repack_block(DType w, const uint8_t* src, uint32_t* dst, uint32_t words) {
  std::memset(dst, 0, words * 4u);
  auto* bytes = reinterpret_cast<uint8_t*>(dst);
  switch (w) {
    case DType::Q8_0:  // d(2) qs(32) -> qs d
      std::memcpy(bytes, src + 2, 32);
      std::memcpy(bytes + 32, src, 2);
      break;
    case DType::Q4_0:  // d(2) qs(16) -> qs d
      std::memcpy(bytes, src + 2, 16);
      std::memcpy(bytes + 16, src, 2);
      break;
    case DType::Q5_0:  // d(2) qh(4) qs(16) -> qh qs d
      std::memcpy(bytes, src + 2, 20);
      std::memcpy(bytes + 20, src, 2);
      break;
    case DType::Q4_K:
      std::memcpy(bytes, src, 144);
      break;
    case DType::Q6_K:
      std::memcpy(bytes, src, 210);
      break;
    default:
      break;
  }
}

}  // namespace

Result<uint32_t> gpu_row_words(DType w, int64_t cols) {
  if (cols <= 0 || cols > (int64_t{1} << 24))
    return error("webgpu: row of ", cols, " elements is out of range");
  if (w == DType::F32) {
    if (cols % 4) return error("webgpu: f32 rows of ", cols, " elements are not a multiple of 4");
    return static_cast<uint32_t>(cols);
  }
  if (w == DType::F16) return static_cast<uint32_t>((cols + 1) / 2);
  BlockLayout l;
  if (!layout_of(w, &l)) return error("webgpu: weight type ", dtype_name(w), " is not supported on the GPU");
  if (cols % l.elems)
    return error("webgpu: ", dtype_name(w), " rows of ", cols, " elements are not whole blocks of ", l.elems);
  return static_cast<uint32_t>(cols / l.elems * l.words);
}

Result<std::vector<uint32_t>> repack_rows(DType w, const void* src, int64_t rows, int64_t cols) {
  SOTTO_ASSIGN(uint32_t row_words, gpu_row_words(w, cols));
  if (rows <= 0) return error("webgpu: matrix of ", rows, " rows");
  const uint64_t total = static_cast<uint64_t>(rows) * row_words;
  if (total > (uint64_t{1} << 32)) return error("webgpu: matrix of ", total * 4, " bytes is too large");
  std::vector<uint32_t> out(static_cast<size_t>(total), 0);
  const auto* in = static_cast<const uint8_t*>(src);
  if (w == DType::F32 || w == DType::F16) {
    const uint64_t row_bytes = static_cast<uint64_t>(cols) * (w == DType::F32 ? 4 : 2);
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(out.data() + static_cast<size_t>(r) * row_words, in + r * row_bytes, row_bytes);
    return out;
  }
  BlockLayout l;
  layout_of(w, &l);
  const uint64_t blocks = static_cast<uint64_t>(rows) * static_cast<uint64_t>(cols / l.elems);
  for (uint64_t b = 0; b < blocks; ++b)
    repack_block(w, in + b * l.src_bytes, out.data() + b * l.words, l.words);
  return out;
}

std::vector<float> rope_table(int n_ctx, int n_rot, float freq_base, float freq_scale) {
  const int half = n_rot / 2;
  std::vector<float> table(static_cast<size_t>(n_ctx) * static_cast<size_t>(half) * 2);
  const float theta_scale = std::pow(freq_base, -2.0f / static_cast<float>(n_rot));
  for (int pos = 0; pos < n_ctx; ++pos) {
    float theta = static_cast<float>(pos);
    for (int i = 0; i < half; ++i) {
      const float angle = freq_scale * theta;
      table[(static_cast<size_t>(pos) * half + i) * 2] = std::cos(angle);
      table[(static_cast<size_t>(pos) * half + i) * 2 + 1] = std::sin(angle);
      theta *= theta_scale;
    }
  }
  return table;
}

Ops::Ops(Device& device) : device_(device) {
  features_.packed_dot = device.info().packed_dot;
  features_.subgroups = device.info().subgroups;
  features_.f16 = device.info().shader_f16 && native_f16_rounds_to_nearest_even(device);
}

Ops::~Ops() {
  for (BufferHandle b : owned_) device_.destroy_buffer(b);
}

uint64_t Ops::max_binding() const {
  const uint64_t device_limit = device_.info().limits.max_storage_buffer_binding_size;
  return max_binding_override_ > 0 ? std::min(device_limit, max_binding_override_) : device_limit;
}

Result<BufferHandle> Ops::buffer(uint64_t bytes, std::string_view label) {
  if (bytes > max_binding())
    return error("webgpu: buffer '", label, "' of ", bytes, " bytes exceeds the storage binding limit (",
                 max_binding(), " bytes)");
  if (std::optional<BufferHandle> view = pool_view(bytes)) return *view;
  SOTTO_ASSIGN(BufferHandle b,
               device_.create_buffer(bytes, kUsageStorage | kUsageCopySrc | kUsageCopyDst, label));
  owned_.push_back(b);
  return b;
}

Result<BufferHandle> Ops::upload(const void* data, uint64_t bytes, std::string_view label) {
  SOTTO_ASSIGN(BufferHandle b, buffer(bytes, label));
  const Binding at = resolve({0, b});
  if (bytes % 4 == 0) {
    SOTTO_TRY(device_.write_buffer(at.buffer, at.offset, data, bytes));
  } else {
    std::vector<uint8_t> padded((bytes + 3) & ~uint64_t{3}, 0);
    std::memcpy(padded.data(), data, bytes);
    SOTTO_TRY(device_.write_buffer(at.buffer, at.offset, padded.data(), padded.size()));
  }
  return b;
}

Result<GpuMatrix> Ops::upload_matrix(DType w, const void* data, int64_t rows, int64_t cols,
                                     std::string_view label) {
  SOTTO_ASSIGN(std::vector<uint32_t> words, repack_rows(w, data, rows, cols));
  GpuMatrix m{w, rows, cols, 0, 0};
  SOTTO_ASSIGN(m.row_words, gpu_row_words(w, cols));
  SOTTO_ASSIGN(m.buffer, upload(words.data(), words.size() * 4, label));
  return m;
}

Result<GpuMatrixParts> Ops::upload_rows_parts(DType w, std::span<const uint32_t> words, int64_t rows,
                                              int64_t cols, std::string_view label) {
  SOTTO_ASSIGN(uint32_t row_words, gpu_row_words(w, cols));
  if (rows <= 0 || words.size() != static_cast<uint64_t>(rows) * row_words)
    return error("webgpu: matrix '", label, "' of ", rows, " rows does not match its ", words.size(),
                 " words");
  const uint64_t row_bytes = uint64_t{row_words} * 4;
  const int64_t part_rows = static_cast<int64_t>(max_binding() / row_bytes);
  if (part_rows == 0)
    return error("webgpu: one row of '", label, "' (", row_bytes,
                 " bytes) exceeds the storage binding limit (", max_binding(), " bytes)");
  GpuMatrixParts parts;
  for (int64_t first = 0; first < rows; first += part_rows) {
    GpuMatrix m{w, std::min(part_rows, rows - first), cols, row_words, 0, first};
    const std::string name =
        parts.empty() && first + part_rows >= rows ? std::string(label) : cat(label, " rows ", first, "+");
    SOTTO_ASSIGN(m.buffer, upload(words.data() + static_cast<size_t>(first) * row_words,
                                  static_cast<uint64_t>(m.rows) * row_bytes, name));
    parts.push_back(m);
  }
  return parts;
}

Result<GpuMatrixParts> Ops::upload_matrix_parts(DType w, const void* data, int64_t rows, int64_t cols,
                                                std::string_view label) {
  SOTTO_ASSIGN(uint32_t row_words, gpu_row_words(w, cols));
  const std::optional<uint64_t> src_row_bytes = dtype_bytes(w, static_cast<uint64_t>(cols));
  if (!src_row_bytes || rows <= 0) return error("webgpu: matrix '", label, "' has no valid rows");
  const int64_t part_rows = static_cast<int64_t>(max_binding() / (uint64_t{row_words} * 4));
  if (part_rows == 0)
    return error("webgpu: one row of '", label, "' (", row_words * 4ull,
                 " bytes) exceeds the storage binding limit (", max_binding(), " bytes)");
  // Part by part, so a large table is never repacked whole in memory.
  GpuMatrixParts parts;
  for (int64_t first = 0; first < rows; first += part_rows) {
    const int64_t n = std::min(part_rows, rows - first);
    const auto* src = static_cast<const uint8_t*>(data) + static_cast<uint64_t>(first) * *src_row_bytes;
    SOTTO_ASSIGN(std::vector<uint32_t> words, repack_rows(w, src, n, cols));
    SOTTO_ASSIGN(
        GpuMatrixParts one,
        upload_rows_parts(w, words, n, cols,
                          first == 0 && n == rows ? std::string(label) : cat(label, " rows ", first, "+")));
    one[0].first_row = first;
    parts.push_back(one[0]);
  }
  return parts;
}

Result<BufferHandle> Ops::step_buffer() {
  SOTTO_ASSIGN(BufferHandle b, device_.create_buffer(16, kUsageUniform | kUsageCopyDst, "step"));
  owned_.push_back(b);
  step_buffers_.push_back(b);
  return b;
}

Result<PipelineHandle> Ops::pipeline(const std::string& key, const std::string& wgsl) {
  for (const auto& [k, p] : pipelines_)
    if (k == key) return p;
  SOTTO_ASSIGN(PipelineHandle p, device_.create_pipeline(wgsl, "main", key));
  pipelines_.emplace_back(key, p);
  sources_[p] = wgsl;
  return p;
}

Result<Binding> Ops::params(uint32_t binding, const void* data, uint32_t bytes) {
  const uint64_t slot = (bytes + kParamAlign - 1) / kParamAlign * kParamAlign;
  if (!param_buffer_ || param_used_ + slot > kParamChunkBytes) {
    SOTTO_ASSIGN(param_buffer_,
                 device_.create_buffer(kParamChunkBytes, kUsageUniform | kUsageCopyDst, "params"));
    owned_.push_back(param_buffer_);
    param_used_ = 0;
  }
  SOTTO_TRY(device_.write_buffer(param_buffer_, param_used_, data, bytes));
  std::vector<uint32_t>& words = param_words_[param_key(param_buffer_, param_used_)];
  words.assign((bytes + 3) / 4, 0);
  std::memcpy(words.data(), data, bytes);
  Binding b{binding, param_buffer_, param_used_, bytes};
  param_used_ += slot;
  return b;
}

Status Ops::add(std::vector<Dispatch>& plan, PipelineHandle p, std::vector<Binding> bindings,
                uint32_t groups_x, uint32_t groups_y) {
  if (groups_x == 0 || groups_x > kMaxGroups || groups_y == 0 || groups_y > kMaxGroups)
    return error("webgpu: a dispatch of ", groups_x, " x ", groups_y, " workgroups is outside 1..",
                 kMaxGroups);
  for (Binding& b : bindings) b = resolve(b);
  SOTTO_ASSIGN(BindGroupHandle g, device_.create_bind_group(p, bindings));
  dispatch_bindings_[g] = bindings;
  Dispatch d;
  d.pipeline = p;
  d.bind_group = g;
  d.groups_x = groups_x;
  d.groups_y = groups_y;
  plan.push_back(d);
  return {};
}

Status Ops::custom(std::vector<Dispatch>& plan, const std::string& key, const std::string& wgsl,
                   std::vector<Binding> bindings, uint32_t groups_x, uint32_t params_binding,
                   std::span<const uint32_t> params) {
  SOTTO_ASSIGN(PipelineHandle p, pipeline(key, wgsl));
  if (!params.empty()) {
    SOTTO_ASSIGN(Binding u,
                 this->params(params_binding, params.data(), static_cast<uint32_t>(params.size() * 4)));
    bindings.push_back(u);
  }
  return add(plan, p, std::move(bindings), groups_x);
}

Status Ops::embed(std::vector<Dispatch>& plan, std::span<const GpuMatrix> table, BufferHandle tok,
                  BufferHandle x, float scale, uint32_t n_tokens) {
  if (table.empty()) return error("webgpu: an embedding table of no parts");
  const GpuMatrix& first = table[0];
  // Every part but the last has the same rows (upload_matrix_parts), so the kernel finds a token's part by
  // division.
  for (size_t i = 0; i < table.size(); ++i)
    if (table[i].dtype != first.dtype || table[i].cols != first.cols ||
        table[i].first_row != first.first_row + static_cast<int64_t>(i) * first.rows ||
        (i + 1 < table.size() && table[i].rows != first.rows))
      return error("webgpu: the parts of an embedding table must be consecutive rows of one shape");
  const uint32_t groups = static_cast<uint32_t>((first.cols + 63) / 64);
  for (size_t at = 0; at < table.size(); at += kEmbedMaxParts) {
    const size_t n = std::min<size_t>(kEmbedMaxParts, table.size() - at);
    const std::string src = wgsl_embed(first.dtype, static_cast<uint32_t>(n));
    if (src.empty())
      return error("webgpu: embedding tables of type ", dtype_name(first.dtype), " are not supported");
    SOTTO_ASSIGN(PipelineHandle p, pipeline(cat("embed_", dtype_name(first.dtype), "_parts", n), src));
    const GpuMatrix& last = table[at + n - 1];
    uint32_t P[8] = {static_cast<uint32_t>(first.cols),
                     first.row_words,
                     static_cast<uint32_t>(table[at].first_row),
                     static_cast<uint32_t>(last.first_row + last.rows),
                     static_cast<uint32_t>(first.rows),
                     0,
                     0,
                     0};
    std::memcpy(&P[5], &scale, 4);
    SOTTO_ASSIGN(Binding pb, params(0, P, sizeof P));
    std::vector<Binding> b = {pb, {2, tok}, {3, x}};
    const uint32_t binding_of_part[kEmbedMaxParts] = {1, 4, 5, 6};
    for (size_t k = 0; k < n; ++k) b.push_back({binding_of_part[k], table[at + k].buffer});
    SOTTO_TRY(add(plan, p, std::move(b), groups, n_tokens));
  }
  return {};
}

Status Ops::norm_quant(std::vector<Dispatch>& plan, BufferHandle x, uint32_t x_offset, BufferHandle weight,
                       uint32_t n, float eps, BufferHandle y, BufferHandle xq, BufferHandle xd, bool quantize,
                       bool accumulate, uint32_t n_tokens, bool q8_k) {
  if (quantize && (n % (q8_k ? 256 : 32) || n > kNormQuantMaxValues))
    return error("webgpu: ", q8_k ? "q8_K" : "q8_0", " activations need a multiple of ", q8_k ? 256 : 32,
                 " values up to ", kNormQuantMaxValues, ", not ", n);
  SOTTO_ASSIGN(PipelineHandle p,
               pipeline(cat(q8_k ? "norm_quant_q8k" : "norm_quant", features_key(features_)),
                        wgsl_norm_quant(q8_k, features_)));
  if (!dummy_) {
    SOTTO_ASSIGN(dummy_, buffer(256, "dummy"));
  }
  uint32_t P[8] = {
      n, (weight ? 1u : 0u) | (quantize ? 0u : 4u) | (accumulate ? 8u : 0u), x_offset, 0, 0, 0, 0, 0};
  std::memcpy(&P[4], &eps, 4);
  SOTTO_ASSIGN(Binding pb, params(0, P, sizeof P));
  if (!xq || !xd) {  // two distinct scratch buffers: one buffer bound writable twice is a validation error
    if (!dummy_q_) {
      SOTTO_ASSIGN(dummy_q_, buffer(256, "dummy q"));
    }
    if (!dummy_d_) {
      SOTTO_ASSIGN(dummy_d_, buffer(256, "dummy d"));
    }
  }
  return add(
      plan, p,
      {pb, {1, x}, {2, weight ? weight : dummy_}, {3, y}, {4, xq ? xq : dummy_q_}, {5, xd ? xd : dummy_d_}},
      1, n_tokens);
}

namespace {

// What matrix x vector and matrix x matrix both require of their weights (`op` names the kernel in errors).
Status check_matrix_op(std::string_view op, const GpuMatrix& w, const GpuMatrix* up,
                       BufferHandle gelu_table) {
  if (gelu_table && !up) return error("webgpu: the GELU variant of ", op, " needs an up matrix");
  if (!gpu_matvec_supported(w.dtype))
    return error("webgpu: ", op, " for ", dtype_name(w.dtype), " weights is not supported");
  if (up && (up->dtype != w.dtype || up->rows != w.rows || up->cols != w.cols))
    return error("webgpu: SwiGLU needs gate and up matrices of one type and shape");
  if (w.rows > int64_t{128 / matvec_lanes(w.dtype)} * kMaxGroups)
    return error("webgpu: ", w.rows, " rows exceed one dispatch");
  if (w.dtype == DType::F16 && w.cols % 2) return error("webgpu: f16 rows need an even width, not ", w.cols);
  return {};
}

}  // namespace

Status Ops::matvec(std::vector<Dispatch>& plan, const GpuMatrix& w, const MatvecInput& in, BufferHandle y,
                   uint32_t y_offset, BufferHandle bias, uint32_t bias_offset, bool accumulate,
                   const GpuMatrix* up, BufferHandle gelu_table) {
  SOTTO_TRY(check_matrix_op("matrix x vector", w, up, gelu_table));
  const bool f32 = !gpu_needs_q8(w.dtype);
  if (f32 && in.x_offset % 4) return error("webgpu: f32 matvec input offset must be a multiple of 4");
  if (f32 && in.norm) return error("webgpu: the fused RMSNorm is only in the quantized matrix kernels");
  if (!f32 && !in.xq &&
      static_cast<uint64_t>(w.cols) + static_cast<uint64_t>(w.cols) / 4 + 1024 >
          device_.info().limits.max_compute_workgroup_storage_size)
    return error("webgpu: rows of ", w.cols, " do not fit the q8_0 staging in workgroup memory");
  const bool staged = !f32 && in.xq != 0;
  if (staged && (in.norm || !in.xd)) return error("webgpu: staged q8_0 input needs xq and xd and no norm");
  const std::string key = cat("matvec_", dtype_name(w.dtype), up ? (gelu_table ? "_geglu" : "_swiglu") : "",
                              features_key(features_),
                              f32      ? ""
                              : staged ? "_staged"
                                       : cat("_", w.cols),
                              "_lanes", matvec_lanes(w.dtype));
  SOTTO_ASSIGN(PipelineHandle p,
               pipeline(key, wgsl_matvec(w.dtype, up != nullptr, features_, static_cast<uint32_t>(w.cols),
                                         staged, gelu_table != 0)));
  if (!dummy_) {
    SOTTO_ASSIGN(dummy_, buffer(256, "dummy"));
  }
  const uint32_t n_sub = static_cast<uint32_t>(w.dtype == DType::F32   ? w.cols / 4
                                               : w.dtype == DType::F16 ? w.cols / 2
                                                                       : w.cols / 32);
  uint32_t P[12] = {static_cast<uint32_t>(w.rows),
                    static_cast<uint32_t>(w.cols),
                    (bias ? 1u : 0u) | (accumulate ? 2u : 0u) | (in.norm ? 4u : 0u),
                    y_offset,
                    w.dtype == DType::F32 ? w.row_words / 4 : w.row_words,
                    n_sub,
                    bias_offset,
                    w.dtype == DType::F32 ? in.x_offset / 4 : in.x_offset,
                    0,
                    0,
                    0,
                    0};
  std::memcpy(&P[8], &in.eps, 4);
  SOTTO_ASSIGN(Binding pb, params(0, P, sizeof P));
  std::vector<Binding> b = {pb, {1, w.buffer}, {4, y}, {5, bias ? bias : dummy_}};
  if (staged) {
    b.push_back({2, in.xq});
    b.push_back({3, in.xd});
  } else {
    b.push_back({2, in.x});
    if (!f32) b.push_back({3, in.norm ? in.norm : dummy_});
  }
  if (up) b.push_back({6, up->buffer});
  if (gelu_table) b.push_back({7, gelu_table});
  const int64_t rows_per_group = 128 / matvec_lanes(w.dtype);
  return add(plan, p, std::move(b), static_cast<uint32_t>((w.rows + rows_per_group - 1) / rows_per_group));
}

Status Ops::matmat(std::vector<Dispatch>& plan, const GpuMatrix& w, const MatvecInput& in, BufferHandle y,
                   uint32_t y_offset, BufferHandle bias, uint32_t bias_offset, bool accumulate,
                   const TokenBatch& batch, const GpuMatrix* up, BufferHandle gelu_table) {
  SOTTO_TRY(check_matrix_op("matrix x matrix", w, up, gelu_table));
  const bool f32 = !gpu_needs_q8(w.dtype);
  if (f32 ? (!in.x || in.x_offset % 4 || in.norm) : (!in.xq || !in.xd || in.norm))
    return error(
        "webgpu: matrix x matrix reads q8_0 rows (quantized weights) or f32 rows, never a fused norm");
  if (!batch.step || batch.max_tokens == 0 || batch.y_stride < y_offset + w.rows)
    return error("webgpu: a token batch needs its step uniform and rows of at least ", y_offset + w.rows,
                 " outputs");
  const std::string key = cat("matmat_", dtype_name(w.dtype), up ? (gelu_table ? "_geglu" : "_swiglu") : "",
                              features_key(features_), "_lanes", matvec_lanes(w.dtype));
  const std::string src =
      wgsl_matmat(w.dtype, up != nullptr, features_, static_cast<uint32_t>(w.cols), gelu_table != 0);
  if (src.empty()) return error("webgpu: no matrix x matrix kernel for ", dtype_name(w.dtype));
  SOTTO_ASSIGN(PipelineHandle p, pipeline(key, src));
  if (!dummy_) {
    SOTTO_ASSIGN(dummy_, buffer(256, "dummy"));
  }
  const uint32_t n_sub = static_cast<uint32_t>(w.dtype == DType::F32   ? w.cols / 4
                                               : w.dtype == DType::F16 ? w.cols / 2
                                                                       : w.cols / 32);
  const uint32_t P[12] = {static_cast<uint32_t>(w.rows),
                          static_cast<uint32_t>(w.cols),
                          (bias ? 1u : 0u) | (accumulate ? 2u : 0u),
                          y_offset,
                          w.dtype == DType::F32 ? w.row_words / 4 : w.row_words,
                          n_sub,
                          bias_offset,
                          w.dtype == DType::F32 ? in.x_offset / 4 : in.x_offset,
                          batch.y_stride,
                          0,
                          0,
                          0};
  SOTTO_ASSIGN(Binding pb, params(0, P, sizeof P));
  std::vector<Binding> b = {pb, {1, w.buffer}, {4, y}, {5, bias ? bias : dummy_}, {8, batch.step, 0, 16}};
  if (f32) {
    b.push_back({2, in.x});
  } else {
    b.push_back({2, in.xq});
    b.push_back({3, in.xd});
  }
  if (up) b.push_back({6, up->buffer});
  if (gelu_table) b.push_back({7, gelu_table});
  const int64_t rows_per_group = 128 / matvec_lanes(w.dtype);
  return add(plan, p, std::move(b), static_cast<uint32_t>((w.rows + rows_per_group - 1) / rows_per_group),
             (batch.max_tokens + kMatmatTokens - 1) / kMatmatTokens);
}

Status Ops::rope_kv(std::vector<Dispatch>& plan, const RopeKvArgs& a) {
  if (a.hd_k > 256 || a.hd_v > 256 || a.hd_k % 2 || a.hd_v % 2 || a.n_rot > a.hd_k)
    return error("webgpu: head sizes ", a.hd_k, "/", a.hd_v, " are not supported (even, at most 256)");
  if ((a.q_norm == 0) != (a.k_norm == 0)) return error("webgpu: q and k norms come together");
  SOTTO_ASSIGN(PipelineHandle p, pipeline("rope_kv", wgsl_rope_kv()));
  uint32_t P[16] = {a.n_head,
                    a.n_head_kv,
                    a.hd_k,
                    a.hd_v,
                    a.n_rot,
                    a.halves ? 1u : 0u,
                    a.k_base,
                    a.v_base,
                    a.n_head_kv * a.hd_k / 2,
                    a.n_head_kv * a.hd_v / 2,
                    a.q_norm ? 1u : 0u,
                    0,
                    0,
                    a.qkv_stride ? a.qkv_stride : a.n_head * a.hd_k + a.n_head_kv * (a.hd_k + a.hd_v),
                    0,
                    0};
  std::memcpy(&P[11], &a.eps, 4);
  std::memcpy(&P[12], &a.q_scale, 4);
  SOTTO_ASSIGN(Binding pb, params(0, P, sizeof P));
  if (!a.q_norm && !dummy_) {
    SOTTO_ASSIGN(dummy_, buffer(256, "dummy"));
  }
  if (!a.q_norm && !dummy_k_norm_) {
    SOTTO_ASSIGN(dummy_k_norm_, buffer(256, "dummy k norm"));
  }
  return add(plan, p,
             {pb,
              {1, a.step, 0, 16},
              {2, a.qkv},
              {3, a.rope_table},
              {4, a.k_cache},
              {5, a.v_cache},
              {6, a.q_norm ? a.q_norm : dummy_},
              {7, a.k_norm ? a.k_norm : dummy_k_norm_}},
             a.n_head + 2 * a.n_head_kv, a.n_tokens);
}

Status Ops::attention(std::vector<Dispatch>& plan, const AttentionGpuArgs& a) {
  if (a.hd_k > 256 || a.hd_v > 256 || a.hd_k == 0 || a.hd_v == 0 || a.hd_k % 2 || a.hd_v % 2 ||
      a.n_head_kv == 0 || a.n_head % a.n_head_kv)
    return error("webgpu: attention shape not supported (", a.n_head, " heads, ", a.n_head_kv,
                 " KV heads, dims ", a.hd_k, "/", a.hd_v, ")");
  const RopeKvArgs* r = a.rope;
  if (r) {
    if (r->n_rot > a.hd_k || r->n_rot % 2 || (r->q_norm == 0) != (r->k_norm == 0) || r->n_tokens != 1 ||
        r->qkv != a.qkv || r->k_cache != a.k_cache || r->v_cache != a.v_cache || r->k_base != a.k_base ||
        r->v_base != a.v_base)
      return error("webgpu: RoPE inside attention takes one token and the attention's own buffers");
  }
  const bool split = a.splits > 1;
  if (split && (!a.f32_sum || a.n_tokens != 1 || a.splits > kMaxAttentionSplits))
    return error("webgpu: attention splits the keys of one token with the f32 sum only, up to ",
                 kMaxAttentionSplits, " ways (asked: ", a.splits, ")");
  SOTTO_ASSIGN(PipelineHandle p, pipeline(cat(r ? "attention_rope" : "attention", a.f32_sum ? "_f32" : "",
                                              split ? "_split" : ""),
                                          wgsl_attention(r != nullptr, a.f32_sum, split)));
  uint32_t P[20] = {a.n_head,
                    a.n_head_kv,
                    a.hd_k,
                    a.hd_v,
                    a.n_head_kv * a.hd_k / 2,
                    a.n_head_kv * a.hd_v / 2,
                    a.k_base,
                    a.v_base,
                    0,
                    a.window,
                    a.qkv_stride ? a.qkv_stride : a.n_head * a.hd_k + a.n_head_kv * (a.hd_k + a.hd_v),
                    a.out_stride ? a.out_stride : a.n_head * a.hd_v,
                    a.max_keys,
                    r ? r->n_rot : 0u,
                    r && r->halves ? 1u : 0u,
                    r && r->q_norm ? 1u : 0u,
                    0,
                    0,
                    a.splits,
                    0};
  std::memcpy(&P[8], &a.scale, 4);
  if (r) {
    std::memcpy(&P[16], &r->eps, 4);
    std::memcpy(&P[17], &r->q_scale, 4);
  }
  SOTTO_ASSIGN(Binding pb, params(0, P, sizeof P));
  std::vector<Binding> b = {pb, {1, a.step, 0, 16}, {2, a.qkv}, {3, a.k_cache}, {4, a.v_cache}, {5, a.out}};
  if (r) {
    if (!r->q_norm && !dummy_) {
      SOTTO_ASSIGN(dummy_, buffer(256, "dummy"));
    }
    if (!r->q_norm && !dummy_k_norm_) {
      SOTTO_ASSIGN(dummy_k_norm_, buffer(256, "dummy k norm"));
    }
    b.push_back({6, r->rope_table});
    b.push_back({7, r->q_norm ? r->q_norm : dummy_});
    b.push_back({8, r->k_norm ? r->k_norm : dummy_k_norm_});
  }
  if (split) {
    // One partials buffer per size, shared by every layer's dispatch (they run one after another, and each
    // leaves its arrival counters at zero).
    const uint64_t bytes = uint64_t{attention_partial_words(a.n_head, a.hd_v, a.splits)} * 4;
    BufferHandle& part = attention_partials_[bytes];
    if (!part) {
      SOTTO_ASSIGN(part, buffer(bytes, "attention partials"));
    }
    b.push_back({9, part});
  }
  return add(plan, p, std::move(b), a.n_head, split ? a.splits : a.n_tokens);
}

Status Ops::argmax(std::vector<Dispatch>& plan, BufferHandle logits, uint32_t n, BufferHandle partial,
                   BufferHandle tok) {
  const uint32_t groups = (n + 1023) / 1024;
  SOTTO_ASSIGN(PipelineHandle p1,
               pipeline(cat("argmax_partial", features_key(features_)), wgsl_argmax_partial(features_)));
  SOTTO_ASSIGN(PipelineHandle p2,
               pipeline(cat("argmax_final", features_key(features_)), wgsl_argmax_final(features_)));
  const uint32_t P1[4] = {n, 0, 0, 0};
  SOTTO_ASSIGN(Binding pb1, params(0, P1, sizeof P1));
  SOTTO_TRY(add(plan, p1, {pb1, {1, logits}, {2, partial}}, groups));
  const uint32_t P2[4] = {groups, 0, 0, 0};
  SOTTO_ASSIGN(Binding pb2, params(0, P2, sizeof P2));
  return add(plan, p2, {pb2, {1, partial}, {2, tok}}, 1);
}

Status Ops::sample(std::vector<Dispatch>& plan, BufferHandle logits, uint32_t n, BufferHandle state,
                   BufferHandle candidates, BufferHandle tok) {
  if (n == 0 || n > kSampleMaxVocab)
    return error("webgpu: sampling over ", n, " logits (the GPU sampler takes 1 to ", kSampleMaxVocab, ")");
  const uint32_t groups = (n + 1023) / 1024;
  SOTTO_ASSIGN(PipelineHandle p1, pipeline("sample_candidates", wgsl_sample_candidates()));
  SOTTO_ASSIGN(PipelineHandle p2, pipeline("sample_draw", wgsl_sample_draw()));
  const uint32_t P1[4] = {n, kSampleMaxTopK, 0, 0};
  SOTTO_ASSIGN(Binding pb1, params(0, P1, sizeof P1));
  SOTTO_TRY(add(plan, p1, {pb1, {1, logits}, {2, state}, {3, candidates}}, groups));
  const uint32_t P2[4] = {groups, kSampleMaxTopK, 0, 0};
  SOTTO_ASSIGN(Binding pb2, params(0, P2, sizeof P2));
  return add(plan, p2, {pb2, {1, candidates}, {2, state}, {3, tok}}, 1);
}

Status Ops::read(BufferHandle buffer, uint64_t offset, void* dst, uint64_t bytes) {
  const Binding at = resolve({0, buffer, offset});
  SOTTO_ASSIGN(ReadHandle r, device_.start_read(at.buffer, at.offset, bytes));
  const DeviceStatus s = device_.finish_read(r, dst);
  if (s == DeviceStatus::Pending)
    return error("webgpu: read pending (asynchronous device): use start/finish_read");
  if (s != DeviceStatus::Ok) return error(device_.last_error());
  return {};
}

}  // namespace sotto::gpu
