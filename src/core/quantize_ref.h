// Scalar reference quantizers: f32 -> a dtype's bytes. They exist so tests and the random-weight model maker
// can produce files in every format the engine reads; they are not tuned for accuracy.
//
//   f32 f16 bf16           exact copy / round to nearest even
//   q4_0 q4_1 q5_0 q5_1    byte-identical to ggml's quantize_row_*_ref (and gguf-py's quantizers)
//   q8_0                   byte-identical to ggml's quantize_row_q8_0_ref
//   q8_K                   ggml's scheme (largest magnitude maps to -127), with bsums
//   q4_K q5_K q6_K         round to nearest with sub-block scales rounded up to cover each sub-block: valid
//                          blocks with ggml's layout, every value within half its sub-block's step, but
//                          simpler (and a little less accurate) than ggml's iterative scale search
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace sotto {

bool dtype_can_quantize(DType t);

// Encodes n values (a multiple of the type's block_elems) from `src` into dtype_bytes(t, n) bytes at `dst`.
// Non-finite inputs give valid but meaningless blocks. Does nothing for types dtype_can_quantize rejects.
void quantize_row_ref(DType t, const float* src, void* dst, int64_t n);

}  // namespace sotto
