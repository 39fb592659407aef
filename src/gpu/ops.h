// The GPU operations a model records into a plan: each call appends its dispatch (pipeline + bind group) to a
// std::vector<Dispatch>; nothing runs until the plan is given to Device::run(). Pipelines are compiled once per
// variant and cached; each dispatch's constant parameters go into a slice of a shared uniform buffer written
// when the dispatch is recorded, so replaying a plan changes nothing but what the caller writes (the step
// uniform: the position).
//
// Weights are uploaded once, repacked so every block is whole 32-bit words (layouts in gpu/kernels.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "gpu/device.h"
#include "gpu/kernels.h"

namespace sotto::gpu {

// Words one row of `cols` elements of type w takes on the GPU; error for types or widths the kernels lack.
Result<uint32_t> gpu_row_words(DType w, int64_t cols);
// GGUF rows -> the GPU layout (gpu_row_words() per row).
Result<std::vector<uint32_t>> repack_rows(DType w, const void* src, int64_t rows, int64_t cols);

// cos/sin of freq_scale * pos * base^(-2i / n_rot) for pos < n_ctx, i < n_rot / 2, as (cos, sin) pairs,
// computed exactly as the CPU's rope_cache() does (the angle stepped by repeated multiplication, the linear
// scaling applied last), so both backends rotate by the same numbers.
std::vector<float> rope_table(int n_ctx, int n_rot, float freq_base, float freq_scale = 1.0f);

// A matrix on the GPU, or one part of a matrix split by rows: rows first_row .. first_row + rows - 1 of it.
struct GpuMatrix {
  DType dtype = DType::F32;
  int64_t rows = 0, cols = 0;
  uint32_t row_words = 0;
  BufferHandle buffer = 0;
  int64_t first_row = 0;
};

// A matrix as one buffer, or split by rows into several where it exceeds the storage binding limit (every
// part but the last of equal rows).
using GpuMatrixParts = std::vector<GpuMatrix>;

// The input of a matrix x vector: f32 x (x_offset elements in; a multiple of 4 for F32 weights). Quantized
// weights: with `norm`, x is RMS-normalised with that weight vector and eps first, inside the kernel; with xq
// and xd (q8_0 blocks a norm_quant dispatch made), those are read instead of x.
struct MatvecInput {
  BufferHandle x = 0;
  uint32_t x_offset = 0;
  BufferHandle norm = 0;
  float eps = 0.0f;
  BufferHandle xq = 0, xd = 0;
};

struct RopeKvArgs {
  BufferHandle qkv = 0;         // q (n_head * hd_k), k (n_head_kv * hd_k), v (n_head_kv * hd_v), f32
  BufferHandle rope_table = 0;  // [pos][n_rot / 2] (cos, sin) pairs, f32
  BufferHandle k_cache = 0, v_cache = 0;  // f16 pairs; layer at k_base / v_base words
  BufferHandle step = 0;                  // uniform {pos, ...}
  uint32_t n_head = 0, n_head_kv = 0, hd_k = 0, hd_v = 0, n_rot = 0;
  bool halves = false;                  // RopeLayout::Halves
  uint32_t k_base = 0, v_base = 0;      // words
  BufferHandle q_norm = 0, k_norm = 0;  // per-head RMSNorm weights (hd_k each) before RoPE; 0: none
  float eps = 0.0f;                     // of that norm
  float q_scale = 1.0f;                 // q times this after RoPE (gemma3)
  uint32_t n_tokens = 1;    // tokens per dispatch (a prompt), each qkv_stride floats after the last
  uint32_t qkv_stride = 0;  // 0: n_head * hd_k + n_head_kv * (hd_k + hd_v)
};

struct AttentionGpuArgs {
  BufferHandle qkv = 0, k_cache = 0, v_cache = 0, step = 0, out = 0;
  uint32_t n_head = 0, n_head_kv = 0, hd_k = 0, hd_v = 0;
  uint32_t k_base = 0, v_base = 0;
  uint32_t max_keys = 0;  // positions the cache holds: keys past them are never read
  float scale = 1.0f;
  uint32_t window = 0;                      // > 0: only the last `window` positions (sliding-window layers)
  uint32_t n_tokens = 1;                    // queries per dispatch (a prompt): positions pos .. pos + n - 1
  uint32_t qkv_stride = 0, out_stride = 0;  // floats per token; 0: the qkv row, n_head * hd_v
  // Decoding: RoPE (and the q/k norms, q's scale) and the current position's cache write done inside, as
  // rope_kv would with these arguments (one dispatch fewer per layer); the cache then needs no rope_kv before.
  const RopeKvArgs* rope = nullptr;
  // The running sum of values in f32, a chunk of keys at a time (gpu/kernels.h wgsl_attention): faster, above all
  // over long contexts, but not the CPU's f16 sum bit for bit.
  bool f32_sum = false;
  // With the f32 sum and one token: a head's keys spread over up to this many workgroups, whole chunks each, as
  // many as the context at each step fills (gpu/kernels.h wgsl_attention's split); 1: one workgroup per head.
  uint32_t splits = 1;
};

// A prompt's tokens in one dispatch: up to `max_tokens` (the plan's size), the step uniform (`step`) saying how
// many this run has; token t's output row is y_stride floats after token t - 1's.
struct TokenBatch {
  uint32_t max_tokens = 1;
  BufferHandle step = 0;
  uint32_t y_stride = 0;
};

// Whether the device's f16 casts (WGSL `f16(x)`, shader-f16) round f32 to nearest even on the op check's
// values (models/llm/gpu/op_check_f16.cpp: random magnitudes, halfway cases, subnormals, the overflow edge), as the CPU's
// f32_to_f16 does: WGSL lets them round either way. False without shader-f16, when the check fails to run, or
// when its read cannot block (in the browser, outside a blocking-read section).
bool native_f16_rounds_to_nearest_even(Device& device);

class Ops {
 public:
  // Kernel features from the device: dot4I8Packed and subgroups where it has them, native f16 conversions
  // where it has shader-f16 and native_f16_rounds_to_nearest_even() (one small dispatch and read).
  explicit Ops(Device& device);
  // Destroys every buffer made through this Ops (weights, activations, parameters); pipelines and bind groups
  // live as long as the device.
  ~Ops();
  Ops(const Ops&) = delete;
  Ops& operator=(const Ops&) = delete;
  Device& device() { return device_; }
  const KernelFeatures& features() const { return features_; }
  void set_features(const KernelFeatures& f) { features_ = f; }
  // The largest buffer a kernel binds: the device's storage binding limit, or less (max_bytes > 0) to test
  // the splitting of matrices with small models.
  uint64_t max_binding() const;
  void set_max_binding(uint64_t max_bytes) { max_binding_override_ = max_bytes; }

  // Storage buffers (storage | copy src | copy dst).
  Result<BufferHandle> buffer(uint64_t bytes, std::string_view label);
  Result<BufferHandle> upload(const void* data, uint64_t bytes, std::string_view label);
  Result<GpuMatrix> upload_matrix(DType w, const void* data, int64_t rows, int64_t cols,
                                  std::string_view label);
  // The same, split by rows into parts of at most max_binding() bytes.
  Result<GpuMatrixParts> upload_matrix_parts(DType w, const void* data, int64_t rows, int64_t cols,
                                             std::string_view label);
  // Rows already in the GPU layout (row_words words each), split the same way.
  Result<GpuMatrixParts> upload_rows_parts(DType w, std::span<const uint32_t> words, int64_t rows,
                                           int64_t cols, std::string_view label);
  // A 16-byte uniform buffer for the per-step values (position).
  Result<BufferHandle> step_buffer();

  // x = table[tok[0]] * scale: one dispatch per kEmbedMaxParts parts of the table.
  // n_tokens > 1: x[t] = table[tok[t]] * scale for t < n_tokens (rows of table.cols floats).
  Status embed(std::vector<Dispatch>& plan, std::span<const GpuMatrix> table, BufferHandle tok,
               BufferHandle x, float scale = 1.0f, uint32_t n_tokens = 1);
  Status embed(std::vector<Dispatch>& plan, const GpuMatrix& table, BufferHandle tok, BufferHandle x) {
    return embed(plan, std::span<const GpuMatrix>(&table, 1), tok, x);
  }
  // y = rms_norm(x[x_offset ...], weight) (weight 0: y = x), then q8_0 into xq / xd unless !quantize (xq, xd
  // may then be 0). The model uses it for f32 / f16 weights; quantized ones fuse it into their matvec.
  // `accumulate`: y += rms_norm(...) (gemma3's post-norms before the residual add). n_tokens > 1: that many
  // vectors of n values, one after another, in x, y, xq and xd. q8_k: quantize as q8_K (for K-quant weights,
  // gpu_needs_q8_k) instead of q8_0.
  Status norm_quant(std::vector<Dispatch>& plan, BufferHandle x, uint32_t x_offset, BufferHandle weight,
                    uint32_t n, float eps, BufferHandle y, BufferHandle xq, BufferHandle xd, bool quantize,
                    bool accumulate = false, uint32_t n_tokens = 1, bool q8_k = false);
  // y[y_offset + r] (+)= W[r] . x (+ bias[bias_offset + r]); with `up`: y = silu(W.x) * (up.x), or with
  // gelu_table (ggml's 65536 f16 GELU values, two to a word): y = gelu(W.x) * (up.x).
  Status matvec(std::vector<Dispatch>& plan, const GpuMatrix& w, const MatvecInput& in, BufferHandle y,
                uint32_t y_offset, BufferHandle bias, uint32_t bias_offset, bool accumulate,
                const GpuMatrix* up = nullptr, BufferHandle gelu_table = 0);
  // The prompt's matrix x matrix: matvec for each of batch.max_tokens tokens (those the step uniform counts),
  // reading q8_0 rows (in.xq, in.xd: a norm_quant of every token) or f32 rows (in.x) of w.cols values.
  Status matmat(std::vector<Dispatch>& plan, const GpuMatrix& w, const MatvecInput& in, BufferHandle y,
                uint32_t y_offset, BufferHandle bias, uint32_t bias_offset, bool accumulate,
                const TokenBatch& batch, const GpuMatrix* up = nullptr, BufferHandle gelu_table = 0);
  Status rope_kv(std::vector<Dispatch>& plan, const RopeKvArgs& a);
  Status attention(std::vector<Dispatch>& plan, const AttentionGpuArgs& a);
  // tok[0] = argmax(logits[0 .. n)); `partial` holds 2 words per 1024 logits.
  Status argmax(std::vector<Dispatch>& plan, BufferHandle logits, uint32_t n, BufferHandle partial,
                BufferHandle tok);
  static uint64_t argmax_partial_bytes(uint32_t n) { return 8ull * ((n + 1023) / 1024); }
  // tok[0] = the token the CPU Sampler would draw from logits[0 .. n) (two dispatches,
  // gpu/kernels_sampling.cpp), its parameters, draw and recent ids in `state` (models/llm/gpu/sample_state.h writes them);
  // `candidates` holds sample_candidates_bytes(n). Errors for n outside 1 ..= kSampleMaxVocab.
  Status sample(std::vector<Dispatch>& plan, BufferHandle logits, uint32_t n, BufferHandle state,
                BufferHandle candidates, BufferHandle tok);
  static uint64_t sample_candidates_bytes(uint32_t n) { return 8ull * kSampleMaxTopK * ((n + 1023) / 1024); }
  static constexpr uint64_t kSampleStateBytes = 4ull * (8 + kSampleMaxRecent);

  // A kernel of the caller's own (models/llm/gpu/layer_kernel.h): its pipeline (made once per `key`), its bindings (views
  // resolved), and `params` as a uniform at binding params_binding when not empty.
  Status custom(std::vector<Dispatch>& plan, const std::string& key, const std::string& wgsl,
                std::vector<Binding> bindings, uint32_t groups_x, uint32_t params_binding = 0,
                std::span<const uint32_t> params = {});

  // A view's root buffer and offset (other buffers as they are).
  Binding resolve(Binding b) const;

  // Blocking read (natively; in wasm Pending comes back as an error asking the caller to go async).
  Status read(BufferHandle buffer, uint64_t offset, void* dst, uint64_t bytes);

  // Pools (gpu/ops_fusion.cpp). While one is open, buffer() and upload() hand out views of one buffer of
  // `capacity` bytes (256-byte aligned), so a fused kernel binds that one root where the plan bound many
  // buffers; once it is full they make buffers of their own again. Views work everywhere in Ops; the device
  // itself never sees them, so buffers the caller writes or reads through the Device must be made outside a
  // pool.
  Status begin_pool(uint64_t capacity, std::string_view label);
  void end_pool() { pool_ = {}; }
  // The dispatches as one (gpu/fusion.h): `sync` holds the failure flag (word 0) and the grid barrier's
  // counters, `slot` this dispatch's; `step` the step uniform. Its grid is `grid` workgroups (clamped to the most
  // any phase had, returned in *widest; its workgroup memory in *workgroup_bytes). Errors for what cannot be
  // fused (the dispatches then stay apart).
  Result<Dispatch> fuse(std::span<const Dispatch> dispatches, BufferHandle step, BufferHandle sync,
                        uint32_t slot, uint32_t grid, uint32_t* widest, uint32_t max_copy_words = 2048,
                        uint64_t* workgroup_bytes = nullptr);

 private:
  Result<PipelineHandle> pipeline(const std::string& key, const std::string& wgsl);
  Result<Binding> params(uint32_t binding, const void* data, uint32_t bytes);
  Status add(std::vector<Dispatch>& plan, PipelineHandle p, std::vector<Binding> bindings, uint32_t groups_x,
             uint32_t groups_y = 1);
  std::optional<BufferHandle> pool_view(uint64_t bytes);
  static uint64_t param_key(BufferHandle buffer, uint64_t offset) {
    return (uint64_t{buffer} << 40) | offset;
  }

  Device& device_;
  KernelFeatures features_;
  std::vector<std::pair<std::string, PipelineHandle>> pipelines_;
  BufferHandle param_buffer_ = 0;
  uint64_t param_used_ = 0;
  BufferHandle dummy_ = 0, dummy_q_ = 0, dummy_d_ = 0, dummy_k_norm_ = 0;
  std::unordered_map<uint64_t, BufferHandle> attention_partials_;  // by size in bytes (Ops::attention, split)
  uint64_t max_binding_override_ = 0;
  std::vector<BufferHandle> owned_;

  // What plan fusion reads back: each pipeline's WGSL, each bind group's bindings, each parameter slice's
  // words, the step uniforms.
  std::unordered_map<PipelineHandle, std::string> sources_;
  std::unordered_map<BindGroupHandle, std::vector<Binding>> dispatch_bindings_;
  std::unordered_map<uint64_t, std::vector<uint32_t>> param_words_;
  std::vector<BufferHandle> step_buffers_;
  // Views: handles from kViewBase up, each a range of a pool's root buffer.
  static constexpr BufferHandle kViewBase = 0x40000000;
  struct View {
    BufferHandle root = 0;
    uint64_t offset = 0, bytes = 0;
  };
  std::vector<View> views_;
  struct Pool {
    BufferHandle root = 0;
    uint64_t used = 0, capacity = 0;
  } pool_;
};

}  // namespace sotto::gpu
