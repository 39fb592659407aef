// sotto_gpu_probe: what plan fusion (gpu/fusion.h) costs on this machine's GPU, apart from any model: the grid
// barrier's time for several grid sizes, and the read bandwidth of plain loads against the atomic loads a fused
// kernel uses for what its own workgroups wrote.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "../../cli/gpu_bandwidth.h"
#include "api/clock.h"
#include "gpu/device.h"
#include "gpu/fusion.h"
#include "probe.h"

namespace sotto::probe {

using cli::time_replays;

namespace {

// Milliseconds per run of `d` (median of 5 batches of `runs`), zeroing `sync` (the barrier's counters) before
// each run. (Runs that need no zeroing are timed by time_replays, cli/gpu_bandwidth.h.)
Result<double> time_runs(gpu::Device& device, const gpu::Dispatch& d, int runs, gpu::BufferHandle sync,
                         uint32_t sync_words) {
  std::vector<double> ms;
  const std::vector<uint32_t> zeros(sync_words, 0);
  for (int batch = 0; batch < 6; ++batch) {
    const double t0 = now_ms();
    for (int r = 0; r < runs; ++r) {
      SOTTO_TRY(device.write_buffer(sync, 0, zeros.data(), zeros.size() * 4));
      SOTTO_TRY(device.run(std::span<const gpu::Dispatch>(&d, 1)));
    }
    SOTTO_TRY(device.wait_idle());
    if (batch > 0) ms.push_back((now_ms() - t0) / runs);  // the first batch warms up
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

Status probe_barrier(gpu::Device& device) {
  const uint32_t storage = gpu::kUsageStorage | gpu::kUsageCopySrc | gpu::kUsageCopyDst;
  // On a CPU adapter (SwiftShader) the same probe in miniature: a GPU's sizes would take many minutes there.
  const bool cpu = device.info().cpu();
  // Read bandwidth: every invocation sums a grid-stride walk over 64 MiB and writes its sum.
  const uint64_t bytes = (cpu ? uint64_t{1} : uint64_t{64}) << 20;
  SOTTO_ASSIGN(gpu::BufferHandle data, device.create_buffer(bytes, storage, "probe data"));
  SOTTO_ASSIGN(gpu::BufferHandle sums, device.create_buffer(4096 * 256 * 4, storage, "probe sums"));
  for (bool atomic : {false, true}) {
    const std::string wgsl =
        cat("@group(0) @binding(0) var<storage, read_write> data: array<", atomic ? "atomic<u32>" : "u32",
            ">;\n", "@group(0) @binding(1) var<storage, read_write> sums: array<u32>;\n",
            "@compute @workgroup_size(256)\n",
            "fn main(@builtin(global_invocation_id) g: vec3u, @builtin(num_workgroups) n: vec3u) {\n",
            "  var s = 0u;\n", "  let count = arrayLength(&data);\n",
            "  for (var i = g.x; i < count; i += n.x * 256u) { s += ",
            atomic ? "atomicLoad(&data[i])" : "data[i]", "; }\n", "  sums[g.x] = s;\n}\n");
    SOTTO_ASSIGN(gpu::PipelineHandle p, device.create_pipeline(wgsl, "main", "probe read"));
    const gpu::Binding b[2] = {{0, data}, {1, sums}};
    SOTTO_ASSIGN(gpu::BindGroupHandle g, device.create_bind_group(p, b));
    gpu::Dispatch d;
    d.pipeline = p;
    d.bind_group = g;
    d.groups_x = 4096;
    SOTTO_ASSIGN(double ms, time_replays(device, std::span<const gpu::Dispatch>(&d, 1)));
    std::printf("read bandwidth, %s loads: %.2f GB/s\n", atomic ? "atomic" : "plain",
                static_cast<double>(bytes) / (ms * 1e6));
  }
  device.destroy_buffer(data);
  device.destroy_buffer(sums);

  // The grid barrier: 65 empty phases fused (64 barriers) against 2 (1 barrier), for several grids.
  auto fused_empty = [&](size_t n_phases) -> Result<gpu::FusedKernel> {
    std::vector<gpu::FusionPhase> phases(n_phases);
    for (gpu::FusionPhase& ph : phases) {
      ph.wgsl = "@compute @workgroup_size(128)\nfn main(@builtin(local_invocation_id) lid: vec3u) {}\n";
      ph.groups_x = 1;  // the barrier alone: no virtual workgroups to walk
    }
    return gpu::fuse_phases(phases, 0, device.info().limits.max_compute_workgroup_storage_size);
  };
  SOTTO_ASSIGN(gpu::FusedKernel one, fused_empty(2));
  SOTTO_ASSIGN(gpu::FusedKernel many, fused_empty(65));
  SOTTO_ASSIGN(gpu::BufferHandle step,
               device.create_buffer(16, gpu::kUsageUniform | gpu::kUsageCopyDst, "step"));
  std::vector<uint32_t> u = many.uniform;  // no parameters, no offsets: the slot
  u[0] = 1;
  SOTTO_ASSIGN(gpu::BufferHandle uniform,
               device.create_buffer(u.size() * 4, gpu::kUsageUniform | gpu::kUsageCopyDst, "fused"));
  SOTTO_TRY(device.write_buffer(uniform, 0, u.data(), u.size() * 4));
  SOTTO_ASSIGN(gpu::BufferHandle sync, device.create_buffer(16, storage, "sync"));
  std::printf("grid barrier (65 phases in one dispatch against 2):\n");
  const std::vector<uint32_t> grids =
      cpu ? std::vector<uint32_t>{1, 2} : std::vector<uint32_t>{132, 264, 528, 1056};
  for (uint32_t grid : grids) {
    double ms[2];
    uint32_t flag = 0;
    for (int k = 0; k < 2; ++k) {
      SOTTO_ASSIGN(gpu::PipelineHandle p, device.create_pipeline(k ? many.wgsl : one.wgsl, "main",
                                                                 k ? "probe barriers" : "probe one barrier"));
      const gpu::Binding b[3] = {{0, step, 0, 16}, {1, uniform}, {2, sync}};
      SOTTO_ASSIGN(gpu::BindGroupHandle g, device.create_bind_group(p, b));
      gpu::Dispatch d;
      d.pipeline = p;
      d.bind_group = g;
      d.groups_x = grid;
      SOTTO_ASSIGN(ms[k], time_runs(device, d, cpu ? 2 : 20, sync, 4));
      SOTTO_ASSIGN(gpu::ReadHandle r, device.start_read(sync, 0, 4));
      uint32_t gave_up = 0;
      if (device.finish_read(r, &gave_up) != gpu::DeviceStatus::Ok) return error(device.last_error());
      flag |= gave_up;
    }
    std::printf("  %5u workgroups: %.2f us per barrier (a dispatch of one barrier: %.1f us)%s\n", grid,
                (ms[1] - ms[0]) * 1000.0 / 63.0, ms[0] * 1000.0,
                flag ? "  GAVE UP (not all resident: no figure)" : "");
  }
  return {};
}

}  // namespace sotto::probe
