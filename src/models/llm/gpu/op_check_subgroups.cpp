// The subgroup reductions (KernelFeatures::subgroups) in the op harness (models/llm/gpu/op_check.h): the layout they
// assume (invocations fill subgroups in local_invocation_index order, so lane ^ s is the subgroup invocation
// id ^ s), and each reducing kernel's output with subgroups on against the same kernel's workgroup-memory tree,
// bit for bit, on fresh random inputs: the kernels promise the same sums, and the GPU tests compare the prompt
// plan with token-by-token decoding bit for bit, whichever path a device takes.
#include <algorithm>
#include <cstring>
#include <set>

#include "core/quantize_ref.h"
#include "gpu/kernels_wgsl.h"
#include "gpu/ops.h"
#include "models/llm/gpu/op_check.h"
#include "models/llm/sampler.h"

namespace sotto::gpu {

namespace {

struct SubgroupChecker {
  Ops& ops;
  Rng rng;
  std::vector<OpCheck>& out;
  std::vector<BufferHandle> owned;

  ~SubgroupChecker() {
    for (BufferHandle b : owned) ops.device().destroy_buffer(b);
  }

  std::vector<float> vec(size_t n, float scale = 1.0f) {
    std::vector<float> v(n);
    for (float& x : v) x = (2.0f * rng.next_unit() - 1.0f) * scale;
    return v;
  }
  Result<BufferHandle> upload(const void* data, size_t bytes, std::string_view label) {
    SOTTO_ASSIGN(BufferHandle b, ops.upload(data, bytes, label));
    owned.push_back(b);
    return b;
  }
  Result<BufferHandle> upload(const std::vector<float>& v, std::string_view label) {
    return upload(v.data(), v.size() * 4, label);
  }
  // n words of random int8 quartets (q8_0 codes).
  Result<BufferHandle> random_words(size_t n, std::string_view label) {
    std::vector<uint32_t> w(n);
    for (uint32_t& x : w) x = static_cast<uint32_t>(rng.next_u64());
    return upload(w.data(), n * 4, label);
  }
  Result<GpuMatrix> matrix(DType w, int64_t rows, int64_t cols, std::string_view label) {
    std::vector<float> values = vec(static_cast<size_t>(rows * cols));
    std::vector<uint8_t> bytes(values.size() * 4);
    if (w == DType::F32) {
      std::memcpy(bytes.data(), values.data(), bytes.size());
    } else {
      const uint64_t row_bytes = *dtype_bytes(w, static_cast<uint64_t>(cols));
      bytes.resize(static_cast<size_t>(row_bytes * rows));
      for (int64_t r = 0; r < rows; ++r)
        quantize_row_ref(w, values.data() + r * cols, bytes.data() + r * row_bytes, cols);
    }
    SOTTO_ASSIGN(GpuMatrix m, ops.upload_matrix(w, bytes.data(), rows, cols, label));
    owned.push_back(m.buffer);
    return m;
  }

  // A buffer the plan writes (its first `initial.size()` words compared), reset to `initial` before each run.
  struct Output {
    BufferHandle buffer = 0;
    std::vector<uint32_t> initial;
  };
  Result<Output> output(size_t words, std::string_view label) {
    Output o;
    std::vector<float> v = vec(words);
    o.initial.resize(words);
    std::memcpy(o.initial.data(), v.data(), words * 4);
    SOTTO_ASSIGN(o.buffer, upload(o.initial.data(), words * 4, label));
    return o;
  }

  // Records and runs the plan `record` makes with the subgroup reductions off, then on, and counts the output
  // words that differ.
  template <class Record>
  Status compare(const std::string& op, const std::string& shape, const std::vector<Output>& outputs,
                 Record record) {
    const KernelFeatures saved = ops.features();
    std::vector<uint32_t> got[2];
    for (int on = 0; on < 2; ++on) {
      KernelFeatures f = saved;
      f.subgroups = on == 1;
      ops.set_features(f);
      Status s;
      for (const Output& o : outputs)
        if (s.ok()) s = ops.device().write_buffer(o.buffer, 0, o.initial.data(), o.initial.size() * 4);
      std::vector<Dispatch> plan;
      if (s.ok()) s = record(plan);
      if (s.ok()) s = ops.device().run(plan);
      ops.set_features(saved);
      SOTTO_TRY(std::move(s));
      for (const Output& o : outputs) {
        std::vector<uint32_t> words(o.initial.size());
        SOTTO_TRY(ops.read(o.buffer, 0, words.data(), words.size() * 4));
        got[on].insert(got[on].end(), words.begin(), words.end());
      }
    }
    size_t differ = 0;
    for (size_t i = 0; i < got[0].size(); ++i) differ += got[0][i] != got[1][i] ? 1 : 0;
    out.push_back({cat(op, ": subgroups vs workgroup tree (words differing)"), shape,
                   static_cast<double>(differ), 0, differ == 0});
    return {};
  }

  // Every invocation of workgroups of `size` checks that subgroupShuffleXor(lid, s) is lid ^ s for each s
  // below the subgroup size and that its subgroup invocation id is lid % subgroup size.
  Status layout(uint32_t size, std::set<uint32_t>& sizes, size_t& wrong) {
    KernelFeatures f;
    f.subgroups = true;
    const std::string wgsl = cat(wgsl_parts::wgsl_enables(f, false, true), R"(
@group(0) @binding(0) var<storage, read_write> y: array<u32>;
@compute @workgroup_size(SIZE)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wg: vec3u,
        @builtin(subgroup_size) sg: u32, @builtin(subgroup_invocation_id) sid: u32) {
  var wrong = select(0u, 1u, sid != lid.x % sg);
  for (var s = 1u; s < sg; s <<= 1u) {
    if (subgroupShuffleXor(lid.x, s) != (lid.x ^ s)) { wrong = 1u; }
  }
  let at = 2u * (wg.x * SIZEu + lid.x);
  y[at] = wrong;
  y[at + 1u] = sg;
}
)");
    std::string src = wgsl;
    wgsl_parts::replace_all(src, "SIZE", cat(size));
    constexpr uint32_t kGroups = 3;
    Device& device = ops.device();
    SOTTO_ASSIGN(PipelineHandle p, device.create_pipeline(src, "main", "subgroup layout check"));
    SOTTO_ASSIGN(BufferHandle y, ops.buffer(uint64_t{2} * kGroups * size * 4, "layout"));
    owned.push_back(y);
    const Binding bindings[] = {{0, y}};
    SOTTO_ASSIGN(BindGroupHandle g, device.create_bind_group(p, bindings));
    Dispatch d;
    d.pipeline = p;
    d.bind_group = g;
    d.groups_x = kGroups;
    SOTTO_TRY(device.run(std::span<const Dispatch>(&d, 1)));
    std::vector<uint32_t> got(size_t{2} * kGroups * size);
    SOTTO_TRY(ops.read(y, 0, got.data(), got.size() * 4));
    for (size_t i = 0; i < got.size(); i += 2) {
      wrong += got[i];
      sizes.insert(got[i + 1]);
    }
    return {};
  }

  // y (+)= W x (+ bias), W rows x cols of type w; `norm`: the RMSNorm fused in; `glu`: SwiGLU; `staged`:
  // random q8_0 activations instead of x.
  Status matvec(DType w, int64_t rows, int64_t cols, bool norm, bool glu, bool staged) {
    SOTTO_ASSIGN(GpuMatrix gw, matrix(w, rows, cols, "w"));
    GpuMatrix gu;
    if (glu) {
      SOTTO_ASSIGN(gu, matrix(w, rows, cols, "up"));
    }
    SOTTO_ASSIGN(BufferHandle bx, upload(vec(static_cast<size_t>(cols), 3.0f), "x"));
    SOTTO_ASSIGN(BufferHandle bn, upload(vec(static_cast<size_t>(cols)), "norm"));
    SOTTO_ASSIGN(BufferHandle bb, upload(vec(static_cast<size_t>(rows)), "bias"));
    SOTTO_ASSIGN(BufferHandle xq, random_words(static_cast<size_t>(cols / 4), "xq"));
    SOTTO_ASSIGN(BufferHandle xd, upload(vec(static_cast<size_t>(cols / 32), 0.02f), "xd"));
    SOTTO_ASSIGN(Output y, output(static_cast<size_t>(rows), "y"));
    MatvecInput in{bx, 0, norm ? bn : 0, 1e-5f};
    if (staged) in = MatvecInput{0, 0, 0, 0.0f, xq, xd};
    return compare(cat("matvec ", dtype_name(w), glu ? " swiglu" : "", norm ? " +rms_norm" : "",
                       staged ? " (staged q8)" : ""),
                   cat("rows ", rows, " cols ", cols, ", ", matvec_lanes(w), " lanes"), {y},
                   [&](std::vector<Dispatch>& plan) {
                     return ops.matvec(plan, gw, in, y.buffer, 0, bb, 0, true, glu ? &gu : nullptr);
                   });
  }

  // The prompt's Y = X W^T for `run` of `plan_tokens` tokens (random q8_0 rows, or f32 rows for F32 weights).
  Status matmat(DType w, int64_t rows, int64_t cols, bool glu, uint32_t run, uint32_t plan_tokens) {
    SOTTO_ASSIGN(GpuMatrix gw, matrix(w, rows, cols, "w"));
    GpuMatrix gu;
    if (glu) {
      SOTTO_ASSIGN(gu, matrix(w, rows, cols, "up"));
    }
    const size_t n = static_cast<size_t>(plan_tokens) * static_cast<size_t>(cols);
    SOTTO_ASSIGN(BufferHandle bx, upload(vec(n), "x"));
    SOTTO_ASSIGN(BufferHandle xq, random_words(n / 4, "xq"));
    SOTTO_ASSIGN(BufferHandle xd, upload(vec(n / 32, 0.02f), "xd"));
    SOTTO_ASSIGN(BufferHandle step, ops.step_buffer());
    const uint32_t s[4] = {0, run, 0, 0};
    SOTTO_TRY(ops.device().write_buffer(step, 0, s, 16));
    const uint32_t y_stride = static_cast<uint32_t>(rows);
    SOTTO_ASSIGN(Output y, output(static_cast<size_t>(plan_tokens) * y_stride, "y"));
    const MatvecInput in = w == DType::F32 ? MatvecInput{bx, 0, 0, 0.0f} : MatvecInput{0, 0, 0, 0.0f, xq, xd};
    return compare(cat("matmat ", dtype_name(w), glu ? " swiglu" : ""),
                   cat("rows ", rows, " cols ", cols, ", ", run, " of ", plan_tokens, " tokens, ",
                       matvec_lanes(w), " lanes"),
                   {y}, [&](std::vector<Dispatch>& plan) {
                     return ops.matmat(plan, gw, in, y.buffer, 0, 0, 0, false,
                                       TokenBatch{plan_tokens, step, y_stride}, glu ? &gu : nullptr);
                   });
  }

  // RMSNorm + q8_0 of `tokens` vectors of n: y, the codes and the scales.
  Status norm_quant(uint32_t n, uint32_t tokens) {
    SOTTO_ASSIGN(BufferHandle bx, upload(vec(size_t{n} * tokens, 3.0f), "x"));
    SOTTO_ASSIGN(BufferHandle bw, upload(vec(n), "w"));
    SOTTO_ASSIGN(Output y, output(size_t{n} * tokens, "y"));
    SOTTO_ASSIGN(Output xq, output(size_t{n} * tokens / 4, "xq"));
    SOTTO_ASSIGN(Output xd, output(size_t{n} * tokens / 32, "xd"));
    return compare("norm_quant", cat("n ", n, ", ", tokens, " tokens"), {y, xq, xd},
                   [&](std::vector<Dispatch>& plan) {
                     return ops.norm_quant(plan, bx, 0, bw, n, 1e-5f, y.buffer, xq.buffer, xd.buffer, true,
                                           false, tokens);
                   });
  }

  // The index of the largest of n logits, the largest value repeated at several indices (ties go to the
  // lowest).
  Status argmax(uint32_t n) {
    std::vector<float> logits = vec(n, 10.0f);
    for (int k = 0; k < 4; ++k) logits[static_cast<size_t>(rng.next_u64() % n)] = 11.0f;
    SOTTO_ASSIGN(BufferHandle bl, upload(logits, "logits"));
    SOTTO_ASSIGN(BufferHandle bp, ops.buffer(Ops::argmax_partial_bytes(n), "partial"));
    owned.push_back(bp);
    SOTTO_ASSIGN(Output tok, output(1, "tok"));
    return compare("argmax", cat("n ", n, ", 4 ties for the largest"), {tok},
                   [&](std::vector<Dispatch>& plan) { return ops.argmax(plan, bl, n, bp, tok.buffer); });
  }
};

}  // namespace

Status check_subgroup_reductions(Ops& ops, uint64_t seed, std::vector<OpCheck>& out) {
  if (!ops.device().info().subgroups) return {};
  SubgroupChecker c{ops, Rng(seed ^ 0x7375626772ull), out, {}};
  std::set<uint32_t> sizes;
  size_t wrong = 0;
  SOTTO_TRY(c.layout(128, sizes, wrong));
  SOTTO_TRY(c.layout(256, sizes, wrong));
  std::string shape = "subgroup size";
  for (uint32_t s : sizes) shape += cat(" ", s);
  out.push_back({"subgroup layout (invocations in index order; wrong)", shape + ", workgroups of 128 and 256",
                 static_cast<double>(wrong), 0, wrong == 0});
  SOTTO_TRY(c.matvec(DType::F32, 37, 256, false, false, false));   // 32 lanes
  SOTTO_TRY(c.matvec(DType::Q4_0, 33, 1024, true, true, false));   // 16 lanes, the norm's tree
  SOTTO_TRY(c.matvec(DType::Q4_0, 19, 2048, true, false, false));  // 16 lanes, 4 blocks each
  SOTTO_TRY(c.matvec(DType::Q8_0, 21, 512, false, true, true));
  SOTTO_TRY(c.matvec(DType::F16, 11, 172, false, true, false));
  SOTTO_TRY(c.matmat(DType::Q4_0, 21, 2048, true, 11, 16));
  SOTTO_TRY(c.matmat(DType::Q8_0, 13, 1024, false, 16, 16));
  SOTTO_TRY(c.matmat(DType::F32, 13, 128, false, 5, 8));
  SOTTO_TRY(c.norm_quant(896, 3));
  SOTTO_TRY(c.argmax(5000));
  return {};
}

}  // namespace sotto::gpu
