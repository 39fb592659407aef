// sotto gpu-probe --bandwidth: the memory bandwidth the matrix x vector kernels are held against, measured
// several ways (the best compute-shader copy is the reference), and those kernels alone on each weight type at
// a small model's shapes and at larger ones, as GB/s and shares of it.
#include "gpu_bandwidth.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string_view>
#include <vector>

#include "api/clock.h"
#include "commands.h"
#include "core/dtype.h"
#include "core/quantize_ref.h"
#include "gpu/ops.h"
#include "models/llm/sampler.h"

namespace sotto::cli {

namespace {

// A walk over src (vec4 words) a grid apart, `unroll` words a step: `step` is a step's code (`k` in it
// becoming 0 .. unroll - 1, each word src[i + k * stride]), `one` the code for a single word at i (the rest),
// `before` and `after` around the walk.
std::string walk_wgsl(int unroll, const std::function<std::string(int)>& step, std::string_view one,
                      std::string_view before, std::string_view after) {
  std::string steps;
  for (int k = 0; k < unroll; ++k) steps += step(k);
  return cat(
      "@group(0) @binding(0) var<storage, read> src: array<vec4u>;\n"
      "@group(0) @binding(1) var<storage, read_write> dst: array<vec4u>;\n"
      "@compute @workgroup_size(256)\n"
      "fn main(@builtin(global_invocation_id) g: vec3u, @builtin(num_workgroups) n: vec3u) {\n"
      "  let count = arrayLength(&src);\n"
      "  let stride = n.x * 256u;\n",
      before, "  var i = g.x;\n  for (; i + ", unroll - 1, "u * stride < count; i += ", unroll,
      "u * stride) {\n", steps, "  }\n  for (; i < count; i += stride) { ", one, " }\n", after, "}\n");
}

// The copy: each step's loads before its stores, so that several loads are in flight per invocation (a store
// may alias the next load, which the compiler must otherwise wait for).
std::string copy_wgsl(int unroll) {
  std::string stores;
  for (int k = 0; k < unroll; ++k) stores += cat("    dst[i + ", k, "u * stride] = v", k, ";\n");
  return walk_wgsl(
      unroll,
      [&](int k) {
        return cat("    let v", k, " = src[i + ", k, "u * stride];\n", k == unroll - 1 ? stores : "");
      },
      "dst[i] = src[i];", "", "");
}

// Reads alone: the walk xor-ing what it loads, written only when it equals a value the data never holds (so
// that the loads cannot be dropped and almost nothing is written).
std::string read_wgsl(int unroll) {
  return walk_wgsl(
      unroll, [](int k) { return cat("    s ^= src[i + ", k, "u * stride];\n"); }, "s ^= src[i];",
      "  var s = vec4u(0u);\n", "  if (s.x == 0xdeadbeefu && s.y == 0x01234567u) { dst[g.x] = s; }\n");
}

}  // namespace

Result<double> time_replays(gpu::Device& device, std::span<const gpu::Dispatch> commands) {
  // Submissions of about 2 ms each (estimated from 8 single runs), so that encoding the next overlaps the GPU
  // running the last, as many as fill ~40 ms.
  SOTTO_TRY(device.run(commands));
  SOTTO_TRY(device.wait_idle());
  double t0 = now_ms();
  for (int i = 0; i < 8; ++i) SOTTO_TRY(device.run(commands));
  SOTTO_TRY(device.wait_idle());
  const double estimate = std::max((now_ms() - t0) / 8.0, 1e-4);
  const size_t per_submit =
      std::clamp<size_t>(static_cast<size_t>(2.0 / estimate), 1, 20000 / commands.size() + 1);
  const int submits =
      static_cast<int>(std::clamp(40.0 / (estimate * static_cast<double>(per_submit)), 3.0, 200.0));
  std::vector<gpu::Dispatch> chunk;
  chunk.reserve(per_submit * commands.size());
  for (size_t r = 0; r < per_submit; ++r) chunk.insert(chunk.end(), commands.begin(), commands.end());
  std::vector<double> ms;
  for (int batch = 0; batch < 6; ++batch) {
    t0 = now_ms();
    for (int s = 0; s < submits; ++s) SOTTO_TRY(device.run(chunk));
    SOTTO_TRY(device.wait_idle());
    if (batch > 0)
      ms.push_back((now_ms() - t0) / (static_cast<double>(submits) * static_cast<double>(per_submit)));
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

Result<Bandwidth> measure_bandwidth(gpu::Device& device, bool verbose) {
  const bool cpu = device.info().cpu();
  const uint64_t bytes = (cpu ? uint64_t{4} : uint64_t{256}) << 20;
  const uint32_t usage = gpu::kUsageStorage | gpu::kUsageCopySrc | gpu::kUsageCopyDst;
  SOTTO_ASSIGN(gpu::BufferHandle a, device.create_buffer(bytes, usage, "bandwidth src"));
  SOTTO_ASSIGN(gpu::BufferHandle b, device.create_buffer(bytes, usage, "bandwidth dst"));
  {  // data that is not all zeros (a pattern, in 16 MiB writes; the copy's result is checked against it)
    std::vector<uint32_t> pattern(size_t{4} << 20);
    for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<uint32_t>(i * 2654435761u);
    for (uint64_t at = 0; at < bytes; at += pattern.size() * 4)
      SOTTO_TRY(
          device.write_buffer(a, at, pattern.data(), std::min<uint64_t>(pattern.size() * 4, bytes - at)));
  }
  const double gb = static_cast<double>(bytes) / 1e9;
  Bandwidth out;
  out.bytes = bytes;
  const std::vector<uint32_t> grids =
      cpu ? std::vector<uint32_t>{16} : std::vector<uint32_t>{528, 1056, 2112, 4224, 16896};
  for (bool copy : {true, false}) {
    for (int unroll : {1, 4}) {
      const std::string wgsl = copy ? copy_wgsl(unroll) : read_wgsl(unroll);
      SOTTO_ASSIGN(gpu::PipelineHandle p, device.create_pipeline(wgsl, "main", copy ? "copy" : "read"));
      const gpu::Binding bindings[2] = {{0, a}, {1, b}};
      SOTTO_ASSIGN(gpu::BindGroupHandle g, device.create_bind_group(p, bindings));
      for (uint32_t grid : grids) {
        gpu::Dispatch d;
        d.pipeline = p;
        d.bind_group = g;
        d.groups_x = grid;
        SOTTO_ASSIGN(double ms, time_replays(device, std::span<const gpu::Dispatch>(&d, 1)));
        const double gbs = (copy ? 2.0 : 1.0) * gb / (ms / 1000.0);
        const std::string how = cat("grid ", grid, " x 256, ", unroll, " vec4 a step");
        if (verbose)
          std::printf("  %-5s %-32s %8.1f GB/s%s\n", copy ? "copy" : "read", how.c_str(), gbs,
                      copy ? " (read + write)" : "");
        if (copy && gbs > out.copy_gbs) {
          out.copy_gbs = gbs;
          out.copy_how = how;
        }
        if (!copy) out.read_gbs = std::max(out.read_gbs, gbs);
      }
      if (copy) {  // the copy's last 4 KiB are the source's (the pattern at word w: w * 2654435761, mod 2^32)
        std::vector<uint32_t> tail(1024);
        const uint64_t at = bytes - tail.size() * 4;
        SOTTO_ASSIGN(gpu::ReadHandle r, device.start_read(b, at, tail.size() * 4));
        if (device.finish_read(r, tail.data()) != gpu::DeviceStatus::Ok) return error(device.last_error());
        const size_t first = static_cast<size_t>((at / 4) % (size_t{4} << 20));
        for (size_t w = 0; w < tail.size(); ++w)
          if (tail[w] != static_cast<uint32_t>((first + w) * 2654435761u))
            return error("gpu-probe: the ", unroll, "-step copy did not copy (word ", at / 4 + w, ")");
      }
    }
  }
  gpu::Dispatch c;
  c.copy_src = a;
  c.copy_dst = b;
  c.copy_bytes = bytes;
  SOTTO_ASSIGN(double ms, time_replays(device, std::span<const gpu::Dispatch>(&c, 1)));
  out.copy_command_gbs = 2.0 * gb / (ms / 1000.0);
  if (verbose)
    std::printf("  copy  the copy command                 %8.1f GB/s (read + write)\n", out.copy_command_gbs);
  device.destroy_buffer(a);
  device.destroy_buffer(b);
  return out;
}

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

}  // namespace sotto::cli
