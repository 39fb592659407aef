// WGSL pieces shared by the kernel files (gpu/kernels.cpp, gpu/kernels_prefill.cpp): the integer dot helpers,
// each weight type's 32-element sub-block dot, and ggml's GELU table lookup. Internal to src/gpu/.
#pragma once

#include <string>
#include <string_view>

#include "core/dtype.h"
#include "gpu/kernels.h"

namespace sotto::gpu::wgsl_parts {

// dot4_fallback, xsum(x0, n) (the sum of n words of xq as int8 lanes), f16lo; need dot4 and xq declared.
extern const char* kDotHelpers;
// fn dot4(a, b): dot4I8Packed, or the same integer dot with shifts.
extern const char* kDot4Packed;
extern const char* kDot4Fallback;
// A weight type's sub-block dot in two halves (kernels.cpp says more): ldSFX(at, sb), the words of sub-block sb
// of the row starting at word `at` of WBUF (loads only, sub_dot_words(w) of them), and wdotSFX(words, sb, x0, xi),
// their dot with the q8_0 activations xq[x0 ..] and scale xd[xi]. Null / 0 for types without one.
const char* sub_dot_source(DType w);
uint32_t sub_dot_words(DType w);
// sub_dot_source(w) reading `buffer` (e.g. "W[" or "W[layer.gate + ") for WBUF[, its functions' names ending in
// `suffix`, and sub_dotSFX(base, sb) = W[row, 32 sb .. 32 sb + 31] . x[same] for a row starting at word `base`,
// reading xq from word 8 sb and xd[sb]; per_token: sub_dotSFX(base, sb, xo, xdo), from words xo + 8 sb and
// xd[xdo + sb] (a prompt's token). Empty for types without one.
std::string sub_dot_instance(DType w, std::string_view buffer, std::string_view suffix,
                             bool per_token = false);
// gelu_f16(g) through ggml's table at binding 7 (needs kF16Rne).
extern const char* kGeluTable;
// f16_bits(x) (round to nearest even), f16r(v), f16r2(a, b), pack_f16(a, b).
extern const char* kF16Rne;
// The same four through f16 casts (needs `enable f16;`): used only where the device's casts were found to
// round to nearest even (KernelFeatures::f16).
extern const char* kF16Native;
// kF16Native when f.f16, else kF16Rne.
const char* f16_helpers(const KernelFeatures& f);
// The `enable` directives a kernel built with f must start with: f16 when f.f16 and the kernel converts to
// f16 (`uses_f16`), subgroups when f.subgroups and it reduces over subgroups (`uses_subgroups`).
std::string wgsl_enables(const KernelFeatures& f, bool uses_f16, bool uses_subgroups);

// A reduction over `width` invocations: `tree`, whose stride loop runs s = width / 2 down to TREE_END through
// workgroup memory, alone (TREE_END = 1); or, with subgroups, that tree for the strides of at least the
// subgroup size only (TREE_END = sg, skipped when a subgroup holds all `width`), then `butterfly` for the strides
// below it in registers. Each butterfly combines (own, partner) in the tree's order, so lane 0 gets the tree's
// result bit for bit (kMatvecTree in kernels.cpp says why).
std::string reduction(std::string_view tree, std::string_view width, std::string_view butterfly,
                      bool subgroups);

void replace_all(std::string& s, std::string_view from, std::string_view to);

}  // namespace sotto::gpu::wgsl_parts
