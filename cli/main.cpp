// sotto: the command-line front end. Subcommands are looked up in kCommands; add a new one by writing
// cli/<name>.cpp and adding a row here.
#include <cstdio>
#include <cstring>
#include <span>
#include <string>

#include "commands.h"

namespace sotto::cli {

namespace {

constexpr std::string_view kVersion = "0.1.0";

constexpr std::string_view kSamplingOptions =
    "  --greedy                 always the most likely token (the default, on every backend)\n"
    "  --temp T                 sample at temperature T > 0 (default 0: greedy)\n"
    "  --top-k K --top-p P --min-p P --repeat-penalty R\n"
    "                           filters applied in llama.cpp's order when sampling (defaults 40, 0.95,\n"
    "                           0.05, 1)\n"
    "  --seed S                 seed of the sampler (same seed, same text on every platform)\n";

constexpr Command kCommands[] = {
    {"info", "info FILE [--json]",
     "show a model or audio file's format, metadata and tensors (GGUF, safetensors, ONNX, .ort, WAV)",
     run_info, "  --json                   one JSON object instead of tables\n"},
    {"generate", "generate -m FILE -p TEXT [-n N] [--json]",
     "write text with a llama/qwen2/qwen3/gemma3 GGUF model on the CPU or the GPU", run_generate,
     "  -m, --model FILE         GGUF model (llama, qwen2, qwen3)\n"
     "  -p, --prompt TEXT        the prompt (BOS added as the file's metadata says)\n"
     "  --prompt-ids JSON        the prompt as token ids instead, e.g. [1,415,2]\n"
     "  -n, --n-predict N        tokens to write (default 64)\n"
     "  --stop TEXT              stop before this text (repeatable)\n"
     "  --threads T              threads (default: the cores, up to 8)\n"
     "  --ctx N                  context positions (default: the model's training context)\n"
     "  --json                   one JSON object: prompt_ids, ids, text, prefill_ms, decode_tokens_per_s "
     "...\n"
     "  --top-logprobs N         with --json: the first step's N most likely tokens\n"
     "  --backend cpu|webgpu     webgpu: on the GPU through Dawn/Vulkan\n"
     "  --attention f16|f32      webgpu: attention's sum of values (default f16, the CPU's bits; f32 is "
     "faster)\n"},
    {"chat", "chat [-m FILE] [--ctx N]", "talk with a chat model; the KV cache is kept across turns",
     run_chat,
     "  -m, --model FILE         GGUF chat model (ChatML, Llama-3, Gemma or plain template); default\n"
     "                           models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf (scripts/get-models.sh)\n"
     "  --system TEXT            system prompt\n"
     "  -n, --n-predict N        tokens per reply at most (default 512)\n"
     "  --stop TEXT              end a reply before this text (repeatable)\n"
     "  --ctx N                  context positions (default 4096)\n"
     "  --threads T              threads (default: the cores, up to 8)\n"
     "  --backend cpu|webgpu     webgpu: on the GPU through Dawn/Vulkan\n"
     "  --attention f16|f32      webgpu: attention's sum of values (default f16, the CPU's bits; f32 is "
     "faster)\n"},
    {"bench", "bench llm -m FILE [--threads T]", "measure prefill (64 and 256 tokens) and decode speed",
     run_bench,
     "  -m, --model FILE         GGUF model\n"
     "  --threads T              threads (default: the cores, up to 8)\n"
     "  --repeats N              repeats; medians are printed\n"
     "  --backend cpu|webgpu     webgpu: on the GPU (dispatches per token; --timings: per-op GPU time, "
     "GB/s)\n"
     "  --fusion on|off|auto     webgpu: on = the separate kernels rewritten as one dispatch per layer; "
     "default auto: the layer kernels below on a GPU where they fit, else separate dispatches\n"
     "  --fusion layers          webgpu: the layers as a hand-written persistent kernel (llama/qwen2, "
     "q4_0/q5_0/q8_0/q4_K/q6_K)\n"
     "  --layers-per-dispatch N  webgpu, with --fusion layers: layers one dispatch runs at most (default: "
     "all)\n"
     "  --fused-grid N           webgpu: workgroups per fused dispatch (default: the widest layer op's)\n"
     "  --fusion-head apart|fused webgpu: the output head's dispatches fused each alone (default) or as one\n"
     "  --fusion-copy W          webgpu: words of earlier phases' output a fused phase copies (default "
     "1024)\n"
     "  --attention f16|f32      webgpu: attention's sum of values (default f16, the CPU's bits; f32 is "
     "faster)\n"
     "  --depth N                decode after a prompt of N tokens (default 16)\n"
     "  --turn K                 also time a K-token prompt appended at the depth (a chat turn)\n"
     "  --no-prefill             skip the 64- and 256-token prefills (CPU)\n"
     "  --json                   one JSON object\n"},
    {"gpu-check", "gpu-check [--seed S]",
     "every GPU kernel against the CPU on fresh random inputs (models/llm/gpu/op_check.h), on this machine's "
     "GPU",
     run_gpu_check, "  --seed S                 seed of the random inputs (default 1)\n"},
    {"tokenize", "tokenize -m FILE [--special] [--no-bos]",
     "UTF-8 text on stdin -> JSON array of token ids, with the GGUF file's own tokenizer", run_tokenize,
     "  -m, --model FILE         any GGUF with tokenizer metadata (vocab-only files too)\n"
     "  --special                text such as <|im_start|> becomes its special token\n"
     "  --no-bos                 do not add BOS/EOS even where the metadata asks for them\n"},
    {"detokenize", "detokenize -m FILE [--hide-special]", "JSON array of token ids on stdin -> the text",
     run_detokenize,
     "  -m, --model FILE         any GGUF with tokenizer metadata\n"
     "  --hide-special           leave control tokens out of the text\n"},
    {"vad", "vad -m MODEL.onnx AUDIO.wav [--json] [--backend cpu|webgpu]",
     "speech probability per 32 ms frame and speech segments, with a Silero VAD v5/v6 ONNX file", run_vad,
     "  -m, --model FILE         silero_vad.onnx (v5 or v6)\n"
     "  --json                   "
     "{\"frame_ms\":32,\"probs\":[...],\"segments\":[{\"start_s\":..,\"end_s\":..}]}\n"
     "  --rate HZ                16000 (default) or 8000: the model branch the audio is resampled for\n"
     "  --positive P             speech starts at probability >= P (default 0.5)\n"
     "  --negative P             frames below P count toward the end (default 0.35)\n"
     "  --redemption-ms MS       silence that ends a segment (default 1400)\n"
     "  --pre-pad-ms MS          audio kept before the start of speech (default 800)\n"
     "  --min-speech-ms MS       segments with less speech are dropped as misfires (default 400)\n"},
    {"transcribe", "transcribe -m MODEL_DIR AUDIO.wav [--json]",
     "speech to text with Moonshine (encoder_model.ort, decoder_model_merged.ort, tokenizer.bin; or the"
     " .onnx files and tokenizer.json) or Parakeet TDT (config.json + model.safetensors)",
     run_transcribe,
     "  -m, --model DIR          models/moonshine-base-en (bash scripts/get-models.sh moonshine), the hub's\n"
     "                           ONNX layout of Moonshine (encoder_model.onnx, decoder_model_merged.onnx,\n"
     "                           tokenizer.json), or a\n"
     "                           ParakeetForTDT directory (config.json, model.safetensors, tokenizer.model)\n"
     "  --json                   {\"text\",\"tokens\",\"audio_s\",\"encode_ms\",\"decode_ms\",\"segments\"}\n"
     "  --threads T              threads (default: the cores, up to 8)\n"
     "  --backend cpu|webgpu     where Moonshine runs (default cpu; webgpu: Dawn)\n"
     "  --bf16x3                 Parakeet on the CPU: the encoder's products as three bf16 products on AMX\n"
     "                           tiles (CPUs with AMX-BF16; ~1.4x faster, encoder within ~1e-4, tokens "
     "kept)\n"
     "  --vad FILE               Silero VAD (.onnx) that cuts audio over 20 s at pauses (default\n"
     "                           DIR/silero_vad.onnx; without one, long audio is cut at its quietest "
     "points)\n"},
    {"phonemize", "phonemize [--lang en-us|en-gb] [--json] [--sentences]",
     "English text on stdin -> Kokoro phonemes (our own G2P on misaki's lexicon)", run_phonemize,
     "  --lang en-us|en-gb       American (default) or British English\n"
     "  --lexicon FILE           g2p-en-*.bin (default models/g2p-en-us.bin or models/g2p-en-gb.bin)\n"
     "  --sentences              one line per sentence (each at most 510 phonemes, a Kokoro call)\n"
     "  --json                   {\"lang\", \"phonemes\", \"sentences\": [{text, phonemes}], \"words\": "
     "[{text, "
     "phonemes, "
     "source}]}\n"},
    {"agent", "agent --in QUESTION.wav --out ANSWER.wav [--json]",
     "the voice agent on files: VAD -> Moonshine -> chat model -> Kokoro, each reply spoken piece by piece, "
     "with the page's latency timeline",
     run_agent,
     "  --in FILE                the question(s): any WAV; each speech segment Silero VAD finds is a turn\n"
     "  -o, --out FILE           the agent's voice (24 kHz float32 WAV; turns 0.3 s apart)\n"
     "  --json                   {\"turns\":[{transcript, reply, voice_to_voice_ms, stages, pieces, ...}],\n"
     "                           \"median_ms\", \"p90_ms\"} (bench/agent_latency.mjs's shape)\n"
     "  -m, --model FILE         chat model (default models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf)\n"
     "  --asr DIR                Moonshine directory (default models/moonshine-base-en)\n"
     "  --tts FILE               Kokoro model (default models/kokoro/kokoro-v1.0.int8.onnx), voices/ beside "
     "it\n"
     "  --voice NAME             Kokoro voice (default af_heart; b* voices speak British English)\n"
     "  --vad FILE               Silero VAD (default models/ or tests/fixtures/vad/silero_vad_v5.1.onnx)\n"
     "  --system TEXT            system prompt (default: the agent page's, short spoken answers)\n"
     "  -n, --n-predict N        reply tokens at most (default 160); replies are greedy\n"
     "  --ctx N                  context positions (default 4096), kept across turns\n"
     "  --first-words N          the reply's first spoken piece: at most N words (default 4; 0: a sentence)\n"
     "  --endpoint-ms MS         silence that ends a turn (default 560, the page's)\n"
     "  --speculate-ms MS        transcribe after this much silence, before the endpoint (default 100; 0: "
     "off)\n"
     "  --threads T              threads of each model (default: the cores, up to 8)\n"
     "  --no-warm-up             skip the page's warm-up (a greeting that puts the system prompt in the "
     "cache)\n"},
    {"speak", "speak -m MODEL --voice NAME|FILE (--phonemes P | --text T) [--speed S] -o OUT.wav [--json]",
     "text-to-speech with Kokoro-82M v1.0 (int8 ONNX) into a 24 kHz WAV, written sentence by sentence",
     run_speak,
     "  -m, --model FILE         kokoro-v1.0.int8.onnx\n"
     "  --voice NAME|FILE        voices/NAME.bin beside the model (af_heart, bm_george, ...) or a file\n"
     "  --phonemes P             misaki IPA, e.g. \"h\xC9\x99l\xCB\x88o\xCA\x8A\" (hello)\n"
     "  --text T                 English text, read by our G2P (b* voices British, the rest American)\n"
     "  --lexicon FILE           the G2P's g2p-en-*.bin (default: models/, from get-models.sh g2p)\n"
     "  --speed S                0.25 .. 4 (default 1)\n"
     "  -o, --output FILE        the WAV to write (float32, 24 kHz)\n"
     "  --threads T              CPU threads (default 2)\n"
     "  --stream                 vocode each sentence in chunks, written as made (as the voice agent "
     "plays them)\n"
     "  --first-chunk-ms MS      --stream: the first chunk's speech (default 300; then doubling)\n"
     "  --lead-ms MS             --stream: the sentence's leading pause kept (default 100)\n"
     "  --backend cpu|webgpu     where it runs (default cpu; webgpu: Dawn)\n"
     "  --json                   "
     "{\"samples\":..,\"sample_rate\":24000,\"audio_s\":..,\"compute_ms\":..,\"first_audio_ms\":..,"
     "\"phonemes\":..}\n"},
};

void print_command_help(const Command& c) {
  std::printf("usage: sotto %.*s\n%.*s\n", static_cast<int>(c.usage.size()), c.usage.data(),
              static_cast<int>(c.summary.size()), c.summary.data());
  if (!c.options.empty())
    std::printf("\noptions:\n%.*s", static_cast<int>(c.options.size()), c.options.data());
  if (c.name == "generate" || c.name == "chat")
    std::printf("%.*s", static_cast<int>(kSamplingOptions.size()), kSamplingOptions.data());
}

void print_usage(std::FILE* out) {
  std::fprintf(out, "usage: sotto COMMAND [ARGS]\n       sotto --help | --version\n\ncommands:\n");
  for (const Command& c : kCommands)
    std::fprintf(out, "  %-28.*s %.*s\n", static_cast<int>(c.usage.size()), c.usage.data(),
                 static_cast<int>(c.summary.size()), c.summary.data());
}

}  // namespace

int fail(std::string_view message) {
  std::fprintf(stderr, "sotto: %.*s\n", static_cast<int>(message.size()), message.data());
  return kExitFailure;
}

int usage_error(std::string_view message) {
  std::fprintf(stderr, "sotto: %.*s\n\n", static_cast<int>(message.size()), message.data());
  print_usage(stderr);
  return kExitUsage;
}

int main(int argc, char** argv) {
  if (argc < 2) return usage_error("no command given");
  std::string_view first = argv[1];
  if (first == "--help" || first == "-h" || first == "help") {
    print_usage(stdout);
    return kExitOk;
  }
  if (first == "--version") {
    std::printf("sotto %.*s\n", static_cast<int>(kVersion.size()), kVersion.data());
    return kExitOk;
  }
  for (const Command& c : kCommands) {
    if (c.name != first) continue;
    // Only right after the command (or its noun: bench llm --help), so a prompt that happens to be "-h"
    // stays a prompt.
    const auto is_help = [](std::string_view a) { return a == "--help" || a == "-h"; };
    if ((argc > 2 && is_help(argv[2])) ||
        (c.name == "bench" && argc > 3 && std::string_view(argv[2]) == "llm" && is_help(argv[3]))) {
      print_command_help(c);
      return kExitOk;
    }
    return c.run(std::span<char* const>(argv + 2, static_cast<size_t>(argc - 2)));
  }
  if (first.starts_with("-")) return usage_error(std::string("unknown option '").append(first).append("'"));
  return usage_error(std::string("unknown command '").append(first).append("'"));
}

}  // namespace sotto::cli

int main(int argc, char** argv) {
  return sotto::cli::main(argc, argv);
}
