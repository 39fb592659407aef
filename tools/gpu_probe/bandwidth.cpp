// sotto_gpu_probe --bandwidth: the matrix x vector kernels alone, one type and shape at a time, held against the
// copy and read bandwidth that `sotto bench llm --backend webgpu` also measures (cli/gpu_bandwidth.h).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "../../cli/gpu_bandwidth.h"
#include "core/dtype.h"
#include "core/quantize_ref.h"
#include "gpu/ops.h"
#include "models/llm/sampler.h"
#include "probe.h"

namespace sotto::probe {

using cli::Bandwidth;
using cli::measure_bandwidth;
using cli::time_replays;

// The matrix x vector kernels alone, one type and shape at a time: each dispatch reads the whole matrix once
// (x, f32, is quantized inside the kernel as the decode plan's do), replayed back to back as in a token, so
// each figure includes its dispatch's launch and the barrier after it.
Status probe_bandwidth(gpu::Device& device) {
  const bool cpu = device.info().cpu();
  std::printf("memory bandwidth (%s buffers; the best copy is the reference below):\n",
              cpu ? "4 MiB" : "256 MiB");
  SOTTO_ASSIGN(Bandwidth bw, measure_bandwidth(device, true));
  std::printf("  best copy %.1f GB/s (%s), reads alone %.1f GB/s, the copy command %.1f GB/s\n\n",
              bw.copy_gbs, bw.copy_how.c_str(), bw.read_gbs, bw.copy_command_gbs);

  struct Shape {
    const char* name;
    int64_t rows, cols;
    bool pair;  // gate and up together (SwiGLU): twice the bytes
  };
  // Qwen2.5-0.5B's matrices (n_embd 896, n_ff 4864, vocab 151936), then Llama-3-8B-sized feed-forward ones.
  const std::vector<Shape> shapes =
      cpu ? std::vector<Shape>{{"small", 64, 256, false}, {"small pair", 64, 256, true}}
          : std::vector<Shape>{{"0.5B q.k.v", 1152, 896, false},    {"0.5B wo", 896, 896, false},
                               {"0.5B gate.up", 4864, 896, true},   {"0.5B down", 896, 4864, false},
                               {"0.5B output", 151936, 896, false}, {"8B gate", 14336, 4096, false},
                               {"8B down", 4096, 14336, false}};
  const DType types[] = {DType::Q4_0, DType::Q5_0, DType::Q8_0, DType::Q4_K,
                         DType::Q6_K, DType::F16,  DType::F32};
  gpu::Ops ops(device);
  std::printf(
      "matrix x vector, one dispatch each, back to back (launch and barrier included); x quantized inside "
      "each\n"
      "workgroup (the decode plan's way up to 16,384 rows), or staged: q8 blocks a dispatch made once "
      "before\n"
      "  %-14s %-5s %8s | %-27s | %-27s\n  %-14s %-5s %8s | %8s %8s %9s | %8s %8s %9s\n",
      "", "", "", "x quantized in the kernel", "x staged", "matrix", "type", "MB", "us each", "GB/s",
      "% of copy", "us each", "GB/s", "% of copy");
  Rng rng(0x5eed);
  auto uniform = [&rng] { return 2.0f * rng.next_unit() - 1.0f; };  // in [-1, 1)
  bool warmed = false;
  for (const Shape& s : shapes) {
    std::vector<float> x(static_cast<size_t>(s.cols));
    for (float& v : x) v = uniform();
    SOTTO_ASSIGN(gpu::BufferHandle bx, ops.upload(x.data(), x.size() * 4, "x"));
    SOTTO_ASSIGN(gpu::BufferHandle by, ops.buffer(static_cast<uint64_t>(s.rows) * 4, "y"));
    SOTTO_ASSIGN(gpu::BufferHandle bxn, ops.buffer(static_cast<uint64_t>(s.cols) * 4, "x copy"));
    SOTTO_ASSIGN(gpu::BufferHandle xq, ops.buffer(static_cast<uint64_t>(s.cols), "xq"));
    SOTTO_ASSIGN(gpu::BufferHandle xd, ops.buffer(static_cast<uint64_t>(s.cols) / 8 + 4, "xd"));
    for (DType t : types) {
      if (!gpu::gpu_row_words(t, s.cols)) continue;  // the type's blocks do not divide the width
      // 64 distinct random rows, repeated: the data's values do not change what the kernel reads.
      const uint64_t row_bytes = *dtype_bytes(t, static_cast<uint64_t>(s.cols));
      const int64_t distinct = std::min<int64_t>(64, s.rows);
      std::vector<uint8_t> rows(static_cast<size_t>(row_bytes * distinct));
      std::vector<float> f(static_cast<size_t>(s.cols));
      for (int64_t r = 0; r < distinct; ++r) {
        for (float& v : f) v = uniform();
        if (t == DType::F32) {
          std::memcpy(rows.data() + r * row_bytes, f.data(), row_bytes);
        } else {
          quantize_row_ref(t, f.data(), rows.data() + r * row_bytes, s.cols);
        }
      }
      const std::string type(dtype_name(t));
      std::vector<uint8_t> w(static_cast<size_t>(row_bytes * s.rows));
      for (int64_t r = 0; r < s.rows; ++r)
        std::memcpy(w.data() + r * row_bytes, rows.data() + (r % distinct) * row_bytes, row_bytes);
      // Copies enough to fill 256 MiB, taken in turn, so that no replay finds its matrix in the last-level
      // cache (the H200's is 50 MB), as no token does (one on a CPU adapter, where that does not matter).
      const uint64_t matrix_bytes = row_bytes * static_cast<uint64_t>(s.rows) * (s.pair ? 2 : 1);
      const uint64_t copies =
          cpu ? 1 : std::clamp<uint64_t>((uint64_t{256} << 20) / matrix_bytes + 1, 1, 1024);
      std::vector<gpu::GpuMatrix> gw, gu;
      Status uploaded;
      for (uint64_t c = 0; c < copies; ++c) {
        auto m = ops.upload_matrix(t, w.data(), s.rows, s.cols, "w");
        if (!m) {
          uploaded = m.status();
          break;
        }
        gw.push_back(*m);
        if (s.pair) {
          SOTTO_ASSIGN(gpu::GpuMatrix u, ops.upload_matrix(t, w.data(), s.rows, s.cols, "up"));
          gu.push_back(u);
        }
      }
      auto release = [&] {
        for (const gpu::GpuMatrix& m : gw) device.destroy_buffer(m.buffer);
        for (const gpu::GpuMatrix& m : gu) device.destroy_buffer(m.buffer);
      };
      if (!uploaded.ok()) {
        std::printf("  %-14s %-5s  (%s)\n", s.name, type.c_str(), uploaded.message().c_str());
        release();
        continue;
      }
      const double mb = static_cast<double>(matrix_bytes) / 1e6;
      std::string line =
          cat("  ", s.name, std::string(14 - std::min<size_t>(14, std::strlen(s.name)), ' '), " ");
      char cell[96];
      std::snprintf(cell, sizeof cell, "%-5s %8.2f |", type.c_str(), mb);
      line += cell;
      const bool q8 = gpu::gpu_needs_q8(t);
      for (bool staged : {false, true}) {
        if (staged && !q8) {
          line += "        -        -         -";
          continue;
        }
        std::vector<gpu::Dispatch> plan;
        if (staged) {  // made once, outside the timed replays
          SOTTO_TRY(ops.norm_quant(plan, bx, 0, 0, static_cast<uint32_t>(s.cols), 0.0f, bxn, xq, xd, true,
                                   false, 1, gpu::gpu_needs_q8_k(t)));
          SOTTO_TRY(device.run(plan));
          plan.clear();
        }
        const gpu::MatvecInput in = staged ? gpu::MatvecInput{0, 0, 0, 0.0f, xq, xd} : gpu::MatvecInput{bx};
        for (uint64_t c = 0; c < copies; ++c)
          SOTTO_TRY(ops.matvec(plan, gw[c], in, by, 0, 0, 0, false, s.pair ? &gu[c] : nullptr));
        if (!warmed) {  // the first kernel timed ran slow on the H200 (clocks still rising): once unrecorded
          SOTTO_TRY(time_replays(device, plan).status());
          warmed = true;
        }
        SOTTO_ASSIGN(double ms, time_replays(device, plan));
        ms /= static_cast<double>(copies);
        const double gbs = mb / ms;  // MB per ms
        std::snprintf(cell, sizeof cell, " %8.2f %8.1f %8.0f%%%s", ms * 1000.0, gbs,
                      100.0 * gbs / bw.copy_gbs, staged ? "" : " |");
        line += cell;
      }
      std::printf("%s\n", line.c_str());
      release();
    }
    for (gpu::BufferHandle b : {bx, by, bxn, xq, xd}) device.destroy_buffer(b);
  }
  return {};
}

}  // namespace sotto::probe
