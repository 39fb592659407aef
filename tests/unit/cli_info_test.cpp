// `sotto info` as a user runs it (and a few other commands' checks: bench, transcribe, the GPU probes): every
// model/audio fixture prints, --json output is valid JSON (checked with the strict parser) with the right
// tensor count, and bad input gives one line on stderr with exit 1 (file) or 2 (usage).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "gpu_test_support.h"
#include "io/json.h"
#include "nn/gemm.h"
#include "test_support.h"

namespace sotto {
namespace {

struct CliRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs the program at `path` with `args` through the shell; stderr goes to a temporary file.
CliRun run_tool(const char* path, const std::string& args) {
  CliRun run;
  char err_path[] = "/tmp/sotto_cli_test_XXXXXX";
  int fd = mkstemp(err_path);
  if (fd < 0) return run;
  close(fd);
  std::string command = std::string("'") + path + "' " + args + " 2>'" + err_path + "'";
  std::FILE* p = popen(command.c_str(), "r");
  if (!p) return run;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) run.out.append(buf, n);
  int status = pclose(p);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (std::FILE* e = std::fopen(err_path, "rb")) {
    while ((n = std::fread(buf, 1, sizeof buf, e)) > 0) run.err.append(buf, n);
    std::fclose(e);
  }
  std::remove(err_path);
  return run;
}

// Runs the CLI (`sotto`).
CliRun run_cli(const std::string& args) {
  return run_tool(SOTTO_CLI_PATH, args);
}

std::string quoted_fixture(const std::string& rel) {
  return "'" + testing::fixture_path(rel) + "'";
}

TEST(CliInfo, JsonForEveryModelFixture) {
  struct Case {
    const char* rel;
    const char* format;
    int n_tensors;  // -1: decided by another reader (ONNX initializers), only checked to be an array
  };
  // Tensor counts: SOURCES.md (48 for stories260K, vocab files have none) and tools/fixture_digests.py (15).
  const Case cases[] = {
      {"llm/stories260K.gguf", "gguf v3", 48},
      {"llm/stories260K-q8_0.gguf", "gguf v3", 48},
      {"llm/stories260K-q4_0.gguf", "gguf v3", 48},
      {"tokenizer/ggml-vocab-qwen2.gguf", "gguf v3", 0},
      {"tokenizer/ggml-vocab-llama-spm.gguf", "gguf v3", 0},
      {"tokenizer/ggml-vocab-llama-bpe.gguf", "gguf v3", 0},
      {"vad/silero_vad_16k.safetensors", "safetensors", 15},
      {"vad/silero_vad_v5.1.onnx", "onnx", -1},
      {"vad/silero_vad_v6.2.onnx", "onnx", -1},
      {"audio/test.wav", "wav", -1},
      {"audio/beckett.wav", "wav", -1},
      {"audio/two_cities_16k.wav", "wav", -1},
      {"audio/sample.wav", "wav", -1},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.rel);
    CliRun run = run_cli("info --json " + quoted_fixture(c.rel));
    ASSERT_EQ(run.exit_code, 0) << run.err;
    EXPECT_TRUE(run.err.empty()) << run.err;
    auto json = parse_json(run.out);
    ASSERT_TRUE(json.ok()) << json.message();
    ASSERT_TRUE(json->is_object());
    const JsonValue* format = json->find("format");
    ASSERT_TRUE(format && format->is_string());
    EXPECT_EQ(format->text.rfind(c.format, 0), 0u) << format->text;
    const JsonValue* tensors = json->find("tensors");
    ASSERT_TRUE(tensors && tensors->is_array());
    if (c.n_tensors >= 0) {
      EXPECT_EQ(tensors->items.size(), static_cast<size_t>(c.n_tensors));
    }
    ASSERT_TRUE(json->find("metadata") && json->find("metadata")->is_array());
    uint64_t sum = 0;
    for (const auto& t : tensors->items) {
      ASSERT_TRUE(t.find("bytes") && t.find("bytes")->as_u64());
      sum += *t.find("bytes")->as_u64();
      EXPECT_TRUE(t.find("name") && t.find("dtype") && t.find("shape") && t.find("offset"));
    }
    EXPECT_EQ(json->find("tensor_bytes")->as_u64(), sum);
  }
}

TEST(CliInfo, TextOutput) {
  CliRun run = run_cli("info " + quoted_fixture("llm/stories260K-q4_0.gguf"));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("gguf v3"), std::string::npos);
  EXPECT_NE(run.out.find("llama.context_length"), std::string::npos);
  EXPECT_NE(run.out.find("tensors (48)"), std::string::npos);
  EXPECT_NE(run.out.find("total: 48 tensors"), std::string::npos);
}

TEST(CliInfo, UnrecognizedFilesFailWithOneLine) {
  const char* others[] = {"audio/Harvard-L2-1.ogg",
                          "asr/tokenizer.model",
                          "asr/mel_reference.json",
                          "asr/reference_output.json",
                          "audio/sample.expected.txt",
                          "llm/quantize_q8_0.log",
                          "tokenizer/ggml-vocab-llama-spm.gguf.inp",
                          "tokenizer/ggml-vocab-llama-spm.gguf.out",
                          "SOURCES.md"};
  for (const char* rel : others) {
    CliRun run = run_cli("info " + quoted_fixture(rel));
    EXPECT_EQ(run.exit_code, 1) << rel;
    EXPECT_TRUE(run.out.empty()) << rel;
    EXPECT_EQ(run.err.rfind("sotto: ", 0), 0u) << run.err;
    EXPECT_NE(run.err.find("unrecognized format"), std::string::npos) << run.err;
    EXPECT_NE(run.err.find("first bytes"), std::string::npos) << run.err;
    EXPECT_EQ(run.err.find('\n'), run.err.size() - 1) << run.err;  // exactly one line
  }
  CliRun missing = run_cli("info /nonexistent/file.gguf");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(missing.err.rfind("sotto: ", 0), 0u);
}

TEST(CliInfo, UsageErrorsExitTwo) {
  for (const char* args : {"", "frobnicate", "--frobnicate", "info", "info --bogus x", "info a b"}) {
    CliRun run = run_cli(args);
    EXPECT_EQ(run.exit_code, 2) << args;
    EXPECT_NE(run.err.find("usage: sotto"), std::string::npos) << args;
  }
  CliRun help = run_cli("--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("info FILE [--json]"), std::string::npos);
  // Every command's own help, and bench's after its noun: the usage line and the options, on stdout.
  for (const char* args : {"generate --help", "chat -h", "bench --help", "bench llm --help", "vad --help"}) {
    CliRun run = run_cli(args);
    EXPECT_EQ(run.exit_code, 0) << args;
    EXPECT_EQ(run.out.rfind("usage: sotto ", 0), 0u) << args << ": " << run.out;
    EXPECT_NE(run.out.find("options:"), std::string::npos) << args;
  }
  CliRun version = run_cli("--version");
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_EQ(version.out.rfind("sotto ", 0), 0u);
}

// bench llm on the CPU (a benchmark, so only its output is checked, not its speed): every figure in --json,
// positive, decoding after the prompt --depth asks for; bad values are usage errors.
TEST(CliBench, JsonHasEveryFigureAndTheDepthAsked) {
  const std::string model = quoted_fixture("llm/stories260K.gguf");
  for (const char* depth : {"", " --depth 300"}) {
    CliRun run = run_cli("bench llm -m " + model + " --threads 1 --repeats 1 --json" + depth);
    ASSERT_EQ(run.exit_code, 0) << run.err;
    auto doc = parse_json(run.out);
    ASSERT_TRUE(doc.ok()) << run.out;
    for (const char* key :
         {"prefill_64_ms", "prefill_256_ms", "decode_ms_per_token", "decode_tokens_per_s"}) {
      const JsonValue* v = doc->find(key);
      ASSERT_TRUE(v && v->is_number()) << key << " in " << run.out;
      EXPECT_GT(std::stod(v->text), 0.0) << key;
    }
    const JsonValue* after = doc->find("decode_after");
    ASSERT_TRUE(after && after->is_number()) << run.out;
    EXPECT_EQ(after->as_u64(), *depth ? 300u : 16u);
  }
  // The GPU bench parses its options before it opens a device: the same message on any machine.
  for (const char* backend : {"", " --backend webgpu"}) {
    for (const char* bad : {"0", "2.5", "99999", "x"}) {
      CliRun run = run_cli("bench llm -m " + model + backend + " --depth " + bad);
      EXPECT_EQ(run.exit_code, 2) << bad << backend;
      EXPECT_NE(run.err.find("--depth must be a whole number"), std::string::npos) << run.err;
    }
  }
}

// transcribe --bf16x3 (Parakeet's split-bf16 products on AMX tiles): one line where it cannot apply (Moonshine,
// the GPU, a CPU without AMX-BF16); where it runs, the same tokens as the float32 products on the CI model.
TEST(CliTranscribe, Bf16x3GivesTheSameTokensOrOneLine) {
  const std::string parakeet = "'" + std::string(SOTTO_SOURCE_DIR) + "/tests/data/parakeet/tdt_ci'";
  const std::string clip = quoted_fixture("audio/beckett.wav");
  auto one_line = [](const CliRun& run, const char* what) {
    EXPECT_EQ(run.exit_code, 1) << run.err;
    EXPECT_EQ(run.err.rfind("sotto: ", 0), 0u) << run.err;
    EXPECT_NE(run.err.find(what), std::string::npos) << run.err;
    EXPECT_EQ(run.err.find('\n'), run.err.size() - 1) << run.err;
  };
  one_line(run_cli("transcribe -m " + parakeet + " " + clip + " --bf16x3 --backend webgpu"), "--backend cpu");
  one_line(run_cli("transcribe -m /no/such/moonshine " + clip + " --bf16x3"), "for Parakeet directories");
  const CliRun f32 = run_cli("transcribe -m " + parakeet + " " + clip + " --json --threads 2");
  ASSERT_EQ(f32.exit_code, 0) << f32.err;
  const CliRun bf16 = run_cli("transcribe -m " + parakeet + " " + clip + " --json --threads 2 --bf16x3");
  if (!nn::cpu::gemm_bf16_use_amx()) return one_line(bf16, "no AMX-BF16");
  ASSERT_EQ(bf16.exit_code, 0) << bf16.err;
  auto tokens = [](const std::string& json) {  // the "tokens": [...] member as printed
    const size_t at = json.find("\"tokens\"");
    return at == std::string::npos ? std::string() : json.substr(at, json.find(']', at) - at + 1);
  };
  EXPECT_FALSE(tokens(f32.out).empty()) << f32.out;
  EXPECT_EQ(tokens(bf16.out), tokens(f32.out));
}

// The GPU probes are a tool (tools/gpu_probe: sotto_gpu_probe), not a command of the product.
TEST(CliGpuProbe, IsNotACommandOfTheProduct) {
  CliRun run = run_cli("gpu-probe --bandwidth");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("gpu-probe"), std::string::npos) << run.err;
}

// sotto_gpu_probe --bandwidth (a benchmark: its output's shape is checked, not its figures): the copy reference
// and a row per weight type; and its options' errors, which come before any device opens.
TEST(CliGpuProbe, BandwidthPrintsTheReferenceAndEveryTypeOptionsAreChecked) {
  CliRun two = run_tool(SOTTO_GPU_PROBE_PATH, "--token --bandwidth");
  EXPECT_EQ(two.exit_code, 2);
  EXPECT_NE(two.err.find("usage: sotto_gpu_probe"), std::string::npos) << two.err;
  CliRun bad = run_tool(SOTTO_GPU_PROBE_PATH, "--bandwith");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("usage: sotto_gpu_probe"), std::string::npos) << bad.err;
  if (!testing::open_test_device()) GTEST_SKIP() << testing::gpu_skip_reason();
  CliRun run = run_tool(SOTTO_GPU_PROBE_PATH, "--bandwidth");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("best copy "), std::string::npos) << run.out;
  for (const char* type : {" q4_0 ", " q5_0 ", " q8_0 ", " q4_K ", " q6_K ", " f16 ", " f32 "})
    EXPECT_NE(run.out.find(type), std::string::npos) << type << " in " << run.out;
}

}  // namespace
}  // namespace sotto
