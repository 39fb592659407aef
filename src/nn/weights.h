// One weight source over every model file format: a model asks for tensors by name and gets them as nn tensors
// on its context, or a one-line error naming the file, the tensor, and the expected and found shape / dtype:
//   encoder_model.ort: tensor 'layers.0.attn.q.weight' has shape [416,52], expected [416,416]
// Formats: GGUF, safetensors, ONNX (initializers, Constant nodes, external data beside the .onnx), and ONNX
// Runtime's .ort flatbuffers. The file's bytes stay where the reader put them (mmap natively, the wasm heap on
// the web); load() copies one tensor onto the context (the GPU uploads it).
//
// Data flows one way: file (io/) -> WeightSource -> a model's typed weights struct -> forward (nn/ops.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "nn/tensor.h"

namespace sotto::nn {

// A tensor as stored in a file: name, dtype, shape (outermost first) and its bytes (possibly unaligned).
struct StoredTensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::span<const uint8_t> bytes;
};

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  // The file's name as errors show it ("encoder_model.ort").
  virtual const std::string& file_name() const = 0;
  // The tensor called `name`, or nullptr.
  virtual const StoredTensor* find(std::string_view name) const = 0;
  // Every tensor, in file order.
  virtual std::span<const StoredTensor> tensors() const = 0;

  // The tensor `name` with exactly this shape and one of `dtypes` (empty: any), on `ctx`.
  Result<Tensor> load(Context& ctx, std::string_view name, const Shape& shape,
                      std::initializer_list<DType> dtypes = {DType::F32}) const;
  // The same, any shape; the caller checks what it needs.
  Result<Tensor> load_any(Context& ctx, std::string_view name) const;
  // A scalar (any shape of one element) as float: a quantization scale or zero point.
  Result<float> scalar(std::string_view name) const;
  // "file: tensor 'name' is missing" style error with the file's name.
  Status missing(std::string_view name, std::string_view what = "") const;
};

// Every format, chosen by the file's contents (magic bytes), not its name. `bytes` must outlive the source.
// `read_sibling` fetches a file next to it by relative name (ONNX external data, e.g. "model.onnx_data");
// nullptr when the caller has none to give (then external data fails with a message naming the file).
using ReadSibling = std::function<Result<std::span<const uint8_t>>(std::string_view relative_name)>;
Result<std::unique_ptr<WeightSource>> open_weights(std::string file_name, std::span<const uint8_t> bytes,
                                                   ReadSibling read_sibling = nullptr);

// Batch norm folded into the conv before it: w' = w * gamma / sqrt(var + eps) per output channel, b' = (b -
// mean) * gamma / sqrt(var + eps) + beta. w [Cout, ...] F32, b [Cout] (undefined: zeros). CPU tensors.
void fold_batch_norm(Context& ctx, Tensor& w, Tensor& b, const Tensor& gamma, const Tensor& beta,
                     const Tensor& mean, const Tensor& var, float eps);

// A layer norm's shift folded into the product after it: (n * gamma + beta) . W^T + b = (n * gamma) . W^T + b',
// b' = b + W . beta (summed in double). The norm then needs no beta, and on the GPU it runs inside the product
// (nn::linear_fused_f32's norm_gamma). w [N, K] F32, b [N] (undefined: zeros), beta [K]. Returns b'. CPU tensors.
Tensor fold_norm_shift(Context& ctx, const Tensor& w, const Tensor& b, const Tensor& beta);

}  // namespace sotto::nn
