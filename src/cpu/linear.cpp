// The dispatcher between the model and the quantized dot-product kernels (cpu/quant_dot.h).
#include "cpu/linear.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "core/half.h"
#include "core/quant_blocks.h"
#include "cpu/quant_dot.h"

namespace sotto {

DType activation_type(DType w) {
  switch (w) {
    case DType::F16:
    case DType::BF16:
      return w;
    case DType::Q4_0:
    case DType::Q5_0:
    case DType::Q8_0:
      return DType::Q8_0;
    case DType::Q4_1:
    case DType::Q5_1:
      return DType::Q8_1;
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
      return DType::Q8_K;
    default:
      return DType::F32;
  }
}

bool linear_supported(DType w) {
  return quant_dot_portable(w) != nullptr;
}

size_t activation_bytes(DType w, int64_t cols) {
  const DTypeInfo& info = dtype_info(activation_type(w));
  return static_cast<size_t>(cols / info.block_elems) * info.block_bytes;
}

void quantize_activations(DType w, const float* x, int64_t cols, void* xq) {
  auto* out = static_cast<uint8_t*>(xq);
  switch (activation_type(w)) {
    case DType::F16:
      for (int64_t i = 0; i < cols; ++i) {
        const uint16_t h = f32_to_f16(x[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      break;
    case DType::BF16:
      for (int64_t i = 0; i < cols; ++i) {
        const uint16_t h = f32_to_bf16(x[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      break;
    case DType::Q8_0:
      quantize_activations_q8_0(x, static_cast<BlockQ8_0*>(xq), cols);
      break;
    case DType::Q8_1:
      quantize_activations_q8_1(x, static_cast<BlockQ8_1*>(xq), cols);
      break;
    case DType::Q8_K:
      quantize_activations_q8_K(x, static_cast<BlockQ8_K*>(xq), cols);
      break;
    default:
      std::memcpy(xq, x, static_cast<size_t>(cols) * sizeof(float));
      break;
  }
}

void linear_rows(DType w, const void* weights, int64_t cols, const void* xq, int64_t n, size_t xq_stride,
                 float* y, int64_t y_stride, int64_t row_begin, int64_t row_end) {
  if (QuantDotRowsFn fn = quant_dot_rows(w))
    fn(weights, cols, xq, n, xq_stride, y, y_stride, row_begin, row_end);
}

namespace {
// [begin, end) of `count` for thread ith of nth, in whole units of `unit` (the last range may be partial).
struct Range {
  int64_t begin;
  int64_t end;
};
Range split(int64_t count, int ith, int nth, int64_t unit) {
  const int64_t units = (count + unit - 1) / unit;
  return {std::min(units * ith / nth * unit, count), std::min(units * (ith + 1) / nth * unit, count)};
}

// A matrix's rows handed to the threads in chunks from a shared counter, not as fixed shares: on a busy machine
// (a browser's two cores are shared with its other processes) a thread descheduled for a while no longer
// holds the others up at the next barrier; the others take its rows. Chunks are whole units of 16 rows (whole
// 4-row passes; 16 f32 outputs are a cache line, so threads never share one), about 8 per thread. Which
// thread computes a row does not change its result.
class RowChunks {
 public:
  RowChunks() = default;
  RowChunks(int64_t rows, int nth) { reset(rows, nth); }
  // Before the pool runs (not while threads take chunks).
  void reset(int64_t rows, int nth) {
    rows_ = rows;
    chunk_ = std::max<int64_t>(16, (rows / (8 * static_cast<int64_t>(nth)) + 15) / 16 * 16);
    next_.store(0, std::memory_order_relaxed);
  }
  // Calls f(begin, end) for each chunk this thread takes, until none is left.
  template <class F>
  void take(F&& f) {
    for (;;) {
      const int64_t begin = next_.fetch_add(chunk_, std::memory_order_relaxed);
      if (begin >= rows_) return;
      f(begin, std::min(begin + chunk_, rows_));
    }
  }

 private:
  int64_t rows_ = 0;
  int64_t chunk_ = 16;
  std::atomic<int64_t> next_{0};
};

// Prompts of at least this many tokens take the tile kernels where the CPU has one for the weight type: a
// tile holds 16 tokens, so below 8 most of its lanes would be padding, and the row kernels' 4-token tiles
// are as fast.
constexpr int64_t kTileMinTokens = 8;

int64_t tile_count(int64_t n) {
  return (n + kTileTokens - 1) / kTileTokens;
}

// Room for every tile of an n-token prompt of `cols`-wide rows.
TileVec* reserve_tiles(LinearScratch& scratch, DType act, int64_t n, int64_t cols) {
  const size_t vecs = tile_vecs(act, cols) * static_cast<size_t>(tile_count(n));
  if (scratch.tiles.size() < vecs) scratch.tiles.resize(vecs);
  return scratch.tiles.data();
}

// Thread ith's share of the tiles, from the activation rows xq (type act, stride bytes apart).
void prepare_tiles(DType act, const uint8_t* xq, size_t stride, int64_t n, int64_t cols, TileVec* tiles,
                   int ith, int nth) {
  const Range part = split(tile_count(n), ith, nth, 1);
  for (int64_t k = part.begin; k < part.end; ++k) {
    const int64_t t0 = k * kTileTokens;
    tile_prepare(act, xq + static_cast<size_t>(t0) * stride, stride,
                 static_cast<int>(std::min<int64_t>(kTileTokens, n - t0)), cols,
                 tiles + static_cast<size_t>(k) * tile_vecs(act, cols));
  }
}

// Rows [begin, end) of every token, tile by tile (the rows' weights stay in cache from one tile to the next).
void tile_rows(QuantDotTileFn fn, DType act, const void* weights, int64_t cols, const TileVec* tiles,
               int64_t n, float* y, int64_t y_stride, int64_t begin, int64_t end) {
  for (int64_t k = 0; k < tile_count(n); ++k) {
    const int64_t t0 = k * kTileTokens;
    fn(weights, cols, tiles + static_cast<size_t>(k) * tile_vecs(act, cols),
       static_cast<int>(std::min<int64_t>(kTileTokens, n - t0)), y + t0 * y_stride, y_stride, begin, end);
  }
}

// The tile kernel for a prompt of n tokens against `rows` rows of type w, or nullptr (use the row kernels).
// q4_0's tiles add in block order, so they serve only the matrices that take block order for single tokens
// too (quant_dot.h): the others keep the row kernels' 8-lane order, and a prompt gives the same logits as the
// same tokens one at a time.
QuantDotTileFn prompt_tile_kernel(DType w, int64_t rows, int64_t n) {
  if (n < kTileMinTokens) return nullptr;
  if (w == DType::Q4_0 && !quant_dot_block_order(w, rows)) return nullptr;
  return quant_dot_tile(w);
}

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
}  // namespace

void linear(ThreadPool& pool, DType w, const void* weights, int64_t rows, int64_t cols, const float* x,
            int64_t n, float* y, LinearScratch& scratch) {
  const QuantDotRowsFn fn = quant_dot_rows_for(w, rows);  // chosen once: every thread runs the same variant
  if (!fn || rows <= 0 || n <= 0) return;
  const size_t stride = activation_bytes(w, cols);
  if (scratch.xq.size() < stride * static_cast<size_t>(n)) scratch.xq.resize(stride * static_cast<size_t>(n));
  uint8_t* xq = scratch.xq.data();
  // Quantizing one row costs about as much as a few rows of the product, so a single token is quantized by
  // the caller alone and only prompts are split over the threads (with a barrier before the product).
  const bool parallel_quantize = n >= 4 && pool.n_threads() > 1;
  if (!parallel_quantize)
    for (int64_t t = 0; t < n; ++t) quantize_activations(w, x + t * cols, cols, xq + t * stride);
  const QuantDotTileFn tile_fn = prompt_tile_kernel(w, rows, n);
  const DType act = activation_type(w);
  TileVec* tiles = tile_fn ? reserve_tiles(scratch, act, n, cols) : nullptr;
  RowChunks chunks(rows, pool.n_threads());
  pool.run([&](int ith, int nth) {
    if (parallel_quantize) {
      const Range tokens = split(n, ith, nth, 1);
      for (int64_t t = tokens.begin; t < tokens.end; ++t)
        quantize_activations(w, x + t * cols, cols, xq + t * stride);
      pool.barrier();
    }
    if (tile_fn) {
      prepare_tiles(act, xq, stride, n, cols, tiles, ith, nth);
      pool.barrier();
      chunks.take([&](int64_t begin, int64_t end) {
        tile_rows(tile_fn, act, weights, cols, tiles, n, y, rows, begin, end);
      });
      return;
    }
    chunks.take([&](int64_t begin, int64_t end) { fn(weights, cols, xq, n, stride, y, rows, begin, end); });
  });
}

void linear_shared_x(ThreadPool& pool, const LinearJob* jobs, int n_jobs, int64_t cols, const float* x,
                     int64_t n, LinearScratch& scratch) {
  constexpr int kMaxJobs = 4;
  QuantDotRowsFn fns[kMaxJobs];
  bool shared = n_jobs > 0 && n_jobs <= kMaxJobs;
  for (int j = 0; shared && j < n_jobs; ++j) {
    fns[j] = quant_dot_rows_for(jobs[j].w, jobs[j].rows);
    shared = fns[j] != nullptr && activation_type(jobs[j].w) == activation_type(jobs[0].w);
  }
  if (!shared) {
    for (int j = 0; j < n_jobs; ++j)
      linear(pool, jobs[j].w, jobs[j].weights, jobs[j].rows, cols, x, n, jobs[j].y, scratch);
    return;
  }
  if (n <= 0) return;
  const DType w0 = jobs[0].w;  // the activation format depends only on it
  const size_t stride = activation_bytes(w0, cols);
  if (scratch.xq.size() < stride * static_cast<size_t>(n)) scratch.xq.resize(stride * static_cast<size_t>(n));
  uint8_t* xq = scratch.xq.data();
  const bool parallel_quantize = n >= 4 && pool.n_threads() > 1;  // as in linear()
  if (!parallel_quantize)
    for (int64_t t = 0; t < n; ++t) quantize_activations(w0, x + t * cols, cols, xq + t * stride);
  QuantDotTileFn tile_fns[kMaxJobs];
  bool any_tiles = false;
  for (int j = 0; j < n_jobs; ++j) {
    tile_fns[j] = prompt_tile_kernel(jobs[j].w, jobs[j].rows, n);
    any_tiles = any_tiles || tile_fns[j] != nullptr;
  }
  const DType act = activation_type(w0);
  TileVec* tiles = any_tiles ? reserve_tiles(scratch, act, n, cols) : nullptr;
  RowChunks chunks[kMaxJobs];
  for (int j = 0; j < n_jobs; ++j) chunks[j].reset(jobs[j].rows, pool.n_threads());
  pool.run([&](int ith, int nth) {
    if (parallel_quantize) {
      const Range tokens = split(n, ith, nth, 1);
      for (int64_t t = tokens.begin; t < tokens.end; ++t)
        quantize_activations(w0, x + t * cols, cols, xq + t * stride);
      pool.barrier();
    }
    if (any_tiles) {
      prepare_tiles(act, xq, stride, n, cols, tiles, ith, nth);
      pool.barrier();
    }
    for (int j = 0; j < n_jobs; ++j)
      chunks[j].take([&](int64_t begin, int64_t end) {
        if (tile_fns[j])
          tile_rows(tile_fns[j], act, jobs[j].weights, cols, tiles, n, jobs[j].y, jobs[j].rows, begin, end);
        else
          fns[j](jobs[j].weights, cols, xq, n, stride, jobs[j].y, jobs[j].rows, begin, end);
      });
  });
}

void linear_filled_x(ThreadPool& pool, DType w, const void* weights, int64_t rows, int64_t cols, float* x,
                     FillX fill, void* ctx, float* y, LinearScratch& scratch) {
  const QuantDotRowsFn fn = quant_dot_rows_for(w, rows);
  if (!fn || rows <= 0) {  // as linear(): y untouched, but x is still the caller's
    fill(ctx, 0, cols);
    return;
  }
  const size_t stride = activation_bytes(w, cols);
  if (scratch.xq.size() < stride) scratch.xq.resize(stride);
  uint8_t* xq = scratch.xq.data();
  const int64_t unit = dtype_info(activation_type(w)).block_elems;
  RowChunks chunks(rows, pool.n_threads());
  pool.run([&](int ith, int nth) {
    const Range part = split(cols, ith, nth, unit);
    if (part.begin < part.end) {
      fill(ctx, part.begin, part.end);
      quantize_activations(w, x + part.begin, part.end - part.begin, xq + activation_bytes(w, part.begin));
    }
    pool.barrier();
    chunks.take([&](int64_t begin, int64_t end) { fn(weights, cols, xq, 1, stride, y, rows, begin, end); });
  });
}

void linear_ref(DType w, const void* weights, int64_t rows, int64_t cols, const float* x, int64_t n,
                float* y) {
  if (!linear_supported(w)) return;
  const DType act = activation_type(w);
  const size_t row_bytes = static_cast<size_t>(cols / dtype_info(w).block_elems) * dtype_info(w).block_bytes;
  std::vector<uint8_t> xq(activation_bytes(w, cols));
  std::vector<float> x_seen(static_cast<size_t>(cols)), w_row(static_cast<size_t>(cols));
  for (int64_t t = 0; t < n; ++t) {
    quantize_activations(w, x + t * cols, cols, xq.data());
    dequantize_row_ref(act, xq.data(), x_seen.data(), cols);
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_row_ref(w, static_cast<const uint8_t*>(weights) + static_cast<size_t>(r) * row_bytes,
                         w_row.data(), cols);

      const uint8_t* w_bytes = static_cast<const uint8_t*>(weights) + static_cast<size_t>(r) * row_bytes;
      double sum = 0;
      for (int64_t c = 0; c < cols; ++c) sum += static_cast<double>(w_row[c]) * x_seen[c];
      if (act == DType::Q8_1) {
        // q4_1 / q5_1: ggml takes the min term m_w * sum(x) from the block's stored s = f16(d_x * sum q),
        // not from the dequantized values, so the reference does too.
        for (int64_t b = 0; b < cols / 32; ++b) {
          const auto* xb = reinterpret_cast<const BlockQ8_1*>(xq.data()) + b;
          const double m = f16_to_f32(load_u16(w_bytes + b * dtype_info(w).block_bytes + 2));
          double x_sum = 0;
          for (int i = 0; i < 32; ++i) x_sum += x_seen[32 * b + i];
          sum += m * (static_cast<double>(f16_to_f32(xb->s)) - x_sum);
        }
      }
      y[t * rows + r] = static_cast<float>(sum);
    }
  }
}

}  // namespace sotto
