// The ops' GPU paths (gpu_ops.cpp): each records one WGSL dispatch on the inputs' context (nn/gpu_recorder.h).
#pragma once

#include <span>
#include <vector>

#include "core/error.h"
#include "nn/fused.h"
#include "nn/ops.h"

namespace sotto::nn::gpu_ops {

inline bool on_gpu(const Tensor& t) {
  return t.defined() && t.ctx().backend() == Backend::Gpu;
}

// A tensor the vec4 kernels can read: it starts and ends on 16-byte boundaries of its buffer.
inline bool vec4_view(const Tensor& t) {
  return t.gpu_offset() % 16 == 0 && t.bytes() % 16 == 0;
}

Tensor binary(const Tensor& a, const Tensor& b, char op);
Tensor scale(const Tensor& x, float s, float bias);
Tensor activation(const Tensor& x, Act act, float alpha);
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b);
// nn/fused.h's f32 product with its epilogue, and the kernel both take (gpu_linear.cpp; Auto: by the rule there,
// from the shape). Tests pin each in turn; natively SOTTO_GPU_LINEAR_KERNEL=64|slice|tall sets it at start.
Tensor linear_fused_f32(const Tensor& x, const Tensor& w, const Tensor& b, const LinearFusedF32& f);
enum class LinearKernel { Auto, Tiled64, SliceK, Tall };
void set_linear_kernel(LinearKernel k);
// The sliced kernel's blocks: 0 (default) 16 rows of 32 outputs where 32-row blocks are fewer than 2 a core, else
// 32 (gpu_linear.cpp); or 16 or 32 everywhere; natively SOTTO_GPU_LINEAR_SLICE_ROWS=16|32.
void set_linear_slice_rows(int rows);
// The tall kernel's shape (gpu_linear.cpp): ct x 4 columns a block, K in `slices` slices of `ks` (8 or 16) ks a
// chunk, split-K to about `target` workgroups; natively SOTTO_GPU_LINEAR_TALL="CT,S,KS,TARGET". Tests set each.
void set_linear_tall_shape(int ct, int slices, int ks, int target);
Tensor pad_reflect(const Tensor& x, int axis, int64_t before, int64_t after);
// Over the last axis: op 0 softmax, op 1 layer norm (gamma, beta optional).
Tensor rows_op(const Tensor& x, uint32_t op, const Tensor& gamma, const Tensor& beta, float eps);
Tensor slice(const Tensor& x, int axis, int64_t begin, int64_t end);
Tensor conv1d(const Tensor& x, const Tensor& w, const Tensor& b, int stride, int padding, int padding_end,
              int dilation, int groups);
Tensor conv1d_fused_f32(const Tensor& x, const Tensor& w, const Tensor& b, const Conv1dOptions& o,
                        const Conv1dFusedF32& f);  // nn/fused.h's
Tensor lstm(const Tensor& x, const LstmWeights& w, bool reverse, const Tensor& h0, const Tensor& c0,
            Tensor* h_out, Tensor* c_out);
// Moonshine's ops (the kernels below the first group in gpu_ops.cpp).
Tensor group_norm(const Tensor& x, int groups, const Tensor& gamma, const Tensor& beta, float eps);
Tensor transpose(const Tensor& x);
Tensor concat(std::span<const Tensor> parts, int axis);
Tensor rope(const Tensor& x, int n_heads, int rotary_dim, float base, int64_t position0, bool interleaved);
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o);
// attention for 16 or more query rows, heads of a multiple of 4 dims up to 64 (gpu_attention.cpp): one
// dispatch, keys streamed through workgroup memory once per 16 queries.
bool attention_tiled_fits(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o);
Tensor attention_tiled(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o);
Tensor attention_stacked(const Tensor& qkv, const AttentionOptions& o);
Tensor linear_int8_affine(const Tensor& x, const Tensor& w, float scale, float offset, const Tensor& b);
Tensor embedding(const Tensor& table, const Tensor& ids);
Tensor argmax(const Tensor& x);  // over the last axis -> I32
// Parakeet's (FastConformer's) ops.
Tensor glu(const Tensor& x, int axis);
Tensor permute(const Tensor& x, std::span<const int> order);
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dOptions& o);
Tensor attention_rel_pos(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& p,
                         const Tensor& pos_bias_u, const Tensor& pos_bias_v, const AttentionOptions& o);
// Parakeet's greedy TDT loop with its state on the GPU (gpu_tdt.cpp): enc_proj [T', H] is the joint's encoder
// side of every frame; tokens, their frames and durations as asr::tdt_greedy gives them (its reference).
struct TdtDecoder {
  const Tensor& embedding;            // [vocab_size, H]
  std::span<const LstmWeights> lstm;  // f32, bias folded, hidden H
  const Tensor &proj_w, &proj_b;      // the prediction side [H, H]
  const Tensor &joint_w, &joint_b;    // [vocab_size + durations, H]
  int32_t blank_id = 0;
  int64_t vocab_size = 0;
  std::span<const int> durations;
  int max_symbols_per_step = 1;
};
struct TdtDecoded {
  std::vector<int32_t> tokens, frames, durations;
};
Result<TdtDecoded> tdt_greedy(const Tensor& enc_proj, const TdtDecoder& d);
// nn/fused.h's decoder-step product (gpu_fused.cpp).
Tensor linear_int8_fused(const Tensor& x, const Int8LinearFused& f);
Tensor attention_partials(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o,
                          int64_t* blocks);  // gpu_ops.cpp's last block
Tensor attention_int8_fused(const Tensor& x, const Int8AttentionFused& f, int64_t* blocks);
Tensor glu_depthwise_conv1d_silu(const Tensor& x, const Tensor& w, const Tensor& b);
void greedy_step(const Tensor& logits, const GreedyLoop& g);
// Kokoro's ops (gpu_kokoro.cpp). repeat_by_durations takes the durations on the host (the forward reads them
// back once); conv_transpose1d the output length the CPU op computes; dynamic_quantize_linear returns uint8 and
// sets *params to a GPU tensor (scale, zero point, min, max) that the int8 products read.
// With `range_partial`, snake also writes its output's range as quantization's first stage would (one dispatch
// instead of two; conv1d_integer_dynamic_quantized_bias takes it).
Tensor snake(const Tensor& x, const Tensor& alpha, Tensor* range_partial = nullptr);
Tensor adain(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps);
Tensor atan2(const Tensor& y, const Tensor& x);
Tensor resize(const Tensor& x, int64_t length, ResizeMode mode);
Tensor repeat_by_durations(const Tensor& x, std::span<const int64_t> reps);
Tensor conv_transpose1d(const Tensor& x, const Tensor& w, const Tensor& b, const ConvTranspose1dOptions& o,
                        int64_t out_len);
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor dynamic_quantize_linear(const Tensor& x, Tensor* params);
Tensor sine_source(const Tensor& f0, int harmonics, int upsample, float sample_rate_hz, float amplitude,
                   float voiced_threshold_hz);
Tensor stft_onnxruntime(const Tensor& signal, const Tensor& window, int n_fft, int hop);
// lstm with int8 weights (ONNX Runtime's DynamicQuantizeLSTM, as nn::lstm's CPU path): one dispatch per step.
Tensor lstm_int8(const Tensor& x, const LstmWeights& w, bool reverse, const Tensor& h0, const Tensor& c0,
                 Tensor* h_out, Tensor* c_out);
// Both directions of an int8 LSTM (no initial state), one dispatch per step for the two: [T, 2H].
Tensor bilstm_int8(const Tensor& x, const LstmWeights& forward, const LstmWeights& backward);
Tensor matmul_integer_dynamic(const Tensor& x, const Tensor& w, const Tensor& w_scales,
                              const Tensor& w_zero_points);
Tensor conv1d_integer_dynamic_quantized_bias(const Tensor& x, const Tensor& w, const Tensor& b,
                                             const Conv1dOptions& o, const Tensor* x_range_partial = nullptr);
// The kernel conv_transpose1d records for groups 1, dilation 1 (Auto: by phases where kernel / stride <= 32,
// else the 16-channel tiled one where kernel <= 32; other convs always take the plain one). Tests pin each in turn.
enum class ConvTransposeKernel { Auto, Plain, Tiled16, Phases };
void set_conv_transpose_kernel(ConvTransposeKernel k);
// The kernel conv1d_integer_dynamic_quantized_bias records for stride-1 convs (Auto: the dot4U8Packed one over
// weights packed once per weight tensor, where the device has packed dot, else tiled i32; strided or far-reaching
// convs always take the plain one). Tests pin each in turn.
enum class ConvIntegerKernel { Auto, Plain, TiledI32, TiledPacked };
void set_conv_integer_kernel(ConvIntegerKernel k);
// The kernel matmul_integer_dynamic records (Auto: the 4-row dot4U8Packed one where the device has packed dot,
// else the 16-row i32 one). Tests pin each in turn.
enum class MatmulIntegerKernel { Auto, Tiled16, Packed };
void set_matmul_integer_kernel(MatmulIntegerKernel k);
// The LSTM kernel bilstm_int8 records (Auto: one dispatch running every step where H <= 256, in workgroups of 512
// threads where the device allows, else 256; else one dispatch per step). Tests pin each in turn.
enum class LstmKernel { Auto, PerStep, Persistent, Persistent256 };
void set_lstm_kernel(LstmKernel k);
// Auto's grid kernel for H <= 256 (gpu_kokoro.cpp): workgroups a direction (-1: the adapter's choice, 16 natively on
// a GPU's Vulkan, else 0; 0: none), the spin limit of its grid barrier, and whether the one-workgroup kernel runs
// after it where it gave up (off only for tests, to see the grid kernel's own output).
struct LstmGrid {
  int32_t workgroups = -1;
  uint32_t spin_limit = 1u << 16;
  bool fallback = true;
};
void set_lstm_grid(const LstmGrid& g);
// An empty GPU tensor: what a failed recorder hands on (every later op returns at once).
Tensor empty_on(const Tensor& x);
// An op without a GPU kernel: fails the recorder (the next read reports `op`) and returns an empty tensor.
Tensor unsupported(const Tensor& x, const char* op);

}  // namespace sotto::nn::gpu_ops

// At the top of every op without a GPU kernel.
#define NN_CPU_ONLY(x, name) \
  if (::sotto::nn::gpu_ops::on_gpu(x)) return ::sotto::nn::gpu_ops::unsupported((x), name)
