// Plan fusion: several consecutive dispatches of a recorded plan run as one dispatch of one shader.
//
// Why: a 0.5B model decodes one token in ~170 dispatches, and on a large GPU each costs a few microseconds of
// launch and pipeline drain whatever its work (bench/README.md): the dispatches, not the bandwidth, set the
// speed. A fused layer is one dispatch whose workgroups run the layer's kernels one after another, meeting at a
// grid barrier between them (an atomic counter in `sync`), so a token costs one dispatch per layer.
//
// How: each kernel's WGSL is rewritten, not re-written by hand, so the fused layer computes exactly what the
// separate dispatches compute (tests compare the logits bit for bit):
//   - its module-scope names get a per-phase prefix; its entry point becomes a function of (local id, workgroup
//     id), and the fused entry point loops each phase over its original workgroups ("virtual workgroups"),
//     grid-stride over however many workgroups the dispatch has;
//   - its parameter uniform becomes a member of the fused kernel's uniform; the step uniform is shared;
//   - its storage bindings become offsets into a few root buffers (the plan's buffers are views of pools, see
//     Ops::begin_pool), read and written through small accessor functions. A root some phase writes is read
//     and written with atomics: a workgroup may read what another wrote earlier in the same dispatch, and
//     WGSL's plain loads may hit a stale cache line (NVIDIA's L1 is not coherent), its plain stores may land
//     after the barrier's counter. Atomic loads go to the coherent level; stores are atomic exchanges whose
//     old values each invocation consumes before the barrier, so they have landed before it arrives;
//   - its workgroup arrays share two pools (plain words and atomic words) that every phase reuses, so the
//     fused kernel needs the largest phase's workgroup memory, not their sum.
//   - what a phase only reads of an earlier phase's output (a norm's input, the staged q8 activations, the
//     SwiGLU product: kilobytes) is copied into workgroup memory once per phase with atomic loads, so its
//     loops read it there: atomic loads in a matrix row's inner loop went to L2 one by one (the fused layer
//     was slower than its separate dispatches until then).
// A grid barrier needs every workgroup of the dispatch resident at once, which WebGPU cannot promise: each
// waits a bounded number of spins, then raises the failure flag (sync word 0) and leaves; the model sees the
// flag with its token and runs that token again unfused with fewer workgroups or none (models/llm/gpu/llm_gpu.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"

namespace sotto::gpu {

// One dispatch to fuse: its kernel's WGSL (entry point `main`, workgroup size kFusedWorkgroupSize), its grid,
// and what each of its bindings holds.
struct FusionPhase {
  struct Bind {
    enum class Kind { Storage, Params, Step };
    uint32_t binding = 0;
    Kind kind = Kind::Storage;
    uint32_t root = 0;             // Storage: index of the root buffer
    uint32_t offset_slot = 0;      // Storage: where the binding's word offset sits in the fused uniform
    uint32_t words = 0;            // Storage: the words bound (0: to the end of the root)
    std::vector<uint32_t> params;  // Params: the uniform's words
  };
  std::string wgsl;
  uint32_t groups_x = 1, groups_y = 1;
  std::vector<Bind> bindings;
};

constexpr uint32_t kFusedWorkgroupSize = 128;
// Spins of a workgroup waiting at a grid barrier before it gives up (a few ms on a GPU; nothing legitimate in
// one layer waits that long).
constexpr uint32_t kFusedSpinLimit = 1u << 20;

struct FusedKernel {
  std::string wgsl;
  // Bindings of the fused kernel: 0 the step uniform, 1 the fused uniform (`uniform`: word 0 the sync slot,
  // then the phases' parameters, the root word offsets from `offsets_word`, each FusionPhase::Bind's at its
  // offset_slot), 2 sync (atomic words), 3 + i root i (read_write when written).
  std::vector<uint32_t> uniform;
  uint32_t offsets_word = 0;
  uint32_t n_roots = 0;
  std::vector<bool> root_written;  // some phase writes it: bound read_write, accessed atomically
  uint32_t widest = 0;             // the most workgroups any phase had: no use in dispatching more
  uint64_t workgroup_bytes = 0;    // workgroup memory of the fused kernel
};

// Fuses the phases in order. Errors (the caller then keeps the dispatches apart) for what the rewriting does not
// handle: another workgroup size, a binding used other than by index, more than 2D grids, workgroup memory over
// `max_workgroup_bytes`.
// `max_copy_words`: the most words of earlier phases' output one phase copies into workgroup memory (more
// workgroup memory per workgroup lets fewer be resident at once).
Result<FusedKernel> fuse_phases(std::span<const FusionPhase> phases, uint32_t n_roots,
                                uint64_t max_workgroup_bytes, uint32_t max_copy_words = 2048);

}  // namespace sotto::gpu
