// The attention KV cache: for every layer and position, the key (after RoPE) and value of each KV head,
// stored as f16 like llama.cpp's default cache (type_k = type_v = F16). Keeping the same rounding is part of
// giving the same tokens: the scores and the weighted sum of values see exactly the numbers llama.cpp sees.
//
// Layout: k[layer][pos][kv_head * head_dim_k + d], v[layer][pos][kv_head * head_dim_v + d]. A position's row
// for all heads is contiguous, so one token's K/V are written with one copy per layer.
#pragma once

#include <cstdint>
#include <vector>

#include "core/error.h"

namespace sotto {

struct KvCache {
  int n_ctx = 0;  // positions the cache can hold
  int n_layer = 0;
  int k_row = 0;               // n_head_kv * head_dim_k
  int v_row = 0;               // n_head_kv * head_dim_v
  int n_past = 0;              // positions already filled (the next token goes to position n_past)
  std::vector<uint16_t> k, v;  // f16 bits

  uint16_t* k_at(int layer, int pos) { return k.data() + (static_cast<size_t>(layer) * n_ctx + pos) * k_row; }
  uint16_t* v_at(int layer, int pos) { return v.data() + (static_cast<size_t>(layer) * n_ctx + pos) * v_row; }
  const uint16_t* k_at(int layer, int pos) const {
    return k.data() + (static_cast<size_t>(layer) * n_ctx + pos) * k_row;
  }
  const uint16_t* v_at(int layer, int pos) const {
    return v.data() + (static_cast<size_t>(layer) * n_ctx + pos) * v_row;
  }
  void clear() { n_past = 0; }
};

// A cache of n_ctx positions; fails (before allocating) when it would pass max_bytes.
inline Result<KvCache> make_kv_cache(int n_ctx, int n_layer, int k_row, int v_row,
                                     uint64_t max_bytes = uint64_t{1} << 34) {
  if (n_ctx <= 0 || n_layer <= 0 || k_row <= 0 || v_row <= 0)
    return error("llm: KV cache needs positive sizes (n_ctx ", n_ctx, ", layers ", n_layer, ")");
  const uint64_t elements = static_cast<uint64_t>(n_ctx) * static_cast<uint64_t>(n_layer) *
                            (static_cast<uint64_t>(k_row) + static_cast<uint64_t>(v_row));
  if (elements * 2 > max_bytes)
    return error("llm: a KV cache of ", n_ctx, " positions needs ", elements * 2,
                 " bytes, more than the limit (", max_bytes, "); use a smaller context");
  KvCache cache;
  cache.n_ctx = n_ctx;
  cache.n_layer = n_layer;
  cache.k_row = k_row;
  cache.v_row = v_row;
  cache.k.assign(static_cast<size_t>(n_ctx) * n_layer * k_row, 0);
  cache.v.assign(static_cast<size_t>(n_ctx) * n_layer * v_row, 0);
  return cache;
}

}  // namespace sotto
