// The memory bandwidth the GPU's matrix x vector kernels are held against, measured several ways (the best
// compute-shader copy is the reference): `sotto bench llm --backend webgpu` gives each decode's share of it, and
// tools/gpu_probe (sotto_gpu_probe --bandwidth) those kernels alone on each weight type.
#include "gpu_bandwidth.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string_view>
#include <vector>

#include "api/clock.h"
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
            return error("bandwidth: the ", unroll, "-step copy did not copy (word ", at / 4 + w, ")");
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

}  // namespace sotto::cli
