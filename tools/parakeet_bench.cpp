// sotto_parakeet_bench MODEL_DIR [--threads N] [--seconds S] [--runs R] [--half] [--unpacked] [--bf16x3]
//                      [--check FILE] [--wav FILE] [--dump DIR] [--serve]:
// times Parakeet TDT on the CPU over a clip: the mel front end, the encoder and the greedy TDT decoder, best of R
// runs after one warm-up. The clip is a synthetic one of S seconds (tones and noise; the weights are random in
// our benchmark files, so the content is moot), or the first S seconds of --wav FILE (resampled to 16 kHz).
// With --check FILE (safetensors holding "mel" [128, T] and "encoder" [T', d_model] from transformers) it also
// reports the encoder's largest difference from that reference. --half stores the matrices as float16 first; the
// float32 matrices are pre-packed for the CPU's product kernel (ParakeetModel::use_packed_matrices) unless
// --unpacked; --bf16x3 packs them for split-bf16 products on AMX tiles instead
// (ParakeetModel::use_bf16x3_products; an error on a CPU without AMX-BF16). --dump DIR writes the clip
// (audio.f32, 16 kHz), its mel (mel.f32, [128, T]), the encoder output (encoder.f32, [T', d_model]), all
// float32, and result.json {"mel_frames", "encoder_frames", "d_model",
// "tokens", "frames", "durations"}: another runtime is checked on the same features (bench/parakeet.mjs).
// --serve: after loading, one line of JSON {"mel_ms", "encode_ms", "decode_ms", the same with _cpu_ms (CPU time
// of the process, all threads), "tokens"} per
// "run" line read on stdin, until EOF (a caller interleaves rounds with another engine without reloading).
//   python3 tools/parakeet_random_weights.py --size v2 --out /tmp/parakeet_v2
//   build/bin/sotto_parakeet_bench /tmp/parakeet_v2 --threads 2 --seconds 6
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "audio/mel.h"
#include "audio/wav_audio.h"
#include "io/file.h"
#include "models/asr/parakeet.h"
#include "nn/weights.h"

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// CPU time of the whole process (every thread): on a loaded machine wall time measures the share of the cores
// we got, CPU time the work (thread-pool spinning included).
double cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

bool write_floats(const std::string& path, const float* data, size_t n) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(n * sizeof(float)));
  return static_cast<bool>(f);
}

std::string json_ints(const std::vector<int32_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: %s MODEL_DIR [--threads N] [--seconds S] [--runs R] [--half] [--unpacked] "
                 "[--bf16x3] [--check "
                 "FILE] [--wav FILE] [--dump DIR] [--serve]\n",
                 argv[0]);
    return 2;
  }
  int threads = 2, runs = 3;
  double seconds = 6.0;
  std::string check, wav, dump;
  bool half = false, packed = true, serve = false, bf16 = false;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--half" || a == "--unpacked") {
      (a == "--half" ? half : packed) = a == "--half";
      continue;
    }
    if (a == "--serve" || a == "--bf16x3") {
      (a == "--serve" ? serve : bf16) = true;
      continue;
    }
    if (i + 1 < argc && a == "--wav") wav = argv[i + 1];
    if (i + 1 < argc && a == "--dump") dump = argv[i + 1];
    if (i + 1 >= argc) break;
    if (a == "--threads") threads = std::atoi(argv[i + 1]);
    if (a == "--seconds") seconds = std::atof(argv[i + 1]);
    if (a == "--runs") runs = std::atoi(argv[i + 1]);
    if (a == "--check") check = argv[i + 1];
    ++i;
  }
  const auto t_load = std::chrono::steady_clock::now();
  auto model = sotto::asr::ParakeetModel::open(argv[1], threads);
  if (!model) {
    std::fprintf(stderr, "%s\n", model.message().c_str());
    return 1;
  }
  std::printf("load %.0f ms (%d layers, d_model %d, vocab %d)\n", ms_since(t_load),
              (*model)->config().n_layers, (*model)->config().d_model, (*model)->config().vocab_size);
  if (half) (*model)->use_half_matrices();
  if (bf16 && !(*model)->use_bf16x3_products())
    return std::fprintf(stderr, "--bf16x3: this CPU has no AMX-BF16 (or the OS does not grant its tiles)\n"),
           1;
  if (packed && !bf16) (*model)->use_packed_matrices();
  if (!check.empty()) {
    auto file = sotto::MappedFile::open(check);
    if (!file) return std::fprintf(stderr, "%s\n", file.message().c_str()), 1;
    auto src = sotto::nn::open_weights(check, file->bytes());
    if (!src) return std::fprintf(stderr, "%s\n", src.message().c_str()), 1;
    auto ctx = sotto::nn::Context::cpu();
    auto mel = (*src)->load_any(*ctx, "mel");
    auto want = (*src)->load_any(*ctx, "encoder");
    if (!mel || !want)
      return std::fprintf(stderr, "%s: needs tensors 'mel' and 'encoder'\n", check.c_str()), 1;
    const sotto::nn::Tensor got = (*model)->encode(
        std::span<const float>(mel->f32(), static_cast<size_t>(mel->elements())), mel->dim(1));
    if (got.elements() != want->elements()) return std::fprintf(stderr, "encoder shape differs\n"), 1;
    double worst = 0;
    for (int64_t i = 0; i < got.elements(); ++i)
      worst = std::max(worst, static_cast<double>(std::fabs(got.f32()[i] - want->f32()[i])));
    std::printf("encoder vs %s: max |diff| %.2e over %lld values\n", check.c_str(), worst,
                static_cast<long long>(got.elements()));
  }
  const size_t n = static_cast<size_t>(seconds * 16000);
  std::vector<float> audio(n);
  if (!wav.empty()) {
    auto file = sotto::MappedFile::open(wav);
    if (!file) return std::fprintf(stderr, "%s\n", file.message().c_str()), 1;
    auto speech = sotto::wav_to_speech_audio(file->bytes(), 16000);
    if (!speech) return std::fprintf(stderr, "%s: %s\n", wav.c_str(), speech.message().c_str()), 1;
    audio = std::move(speech->samples);
    if (audio.size() > n) audio.resize(n);
  } else {
    uint32_t seed = 1;
    for (size_t i = 0; i < n; ++i) {
      seed = seed * 1664525u + 1013904223u;
      const double t = static_cast<double>(i) / 16000.0;
      audio[i] = static_cast<float>(0.2 * std::sin(2 * M_PI * 220 * t) * std::sin(2 * M_PI * 1.3 * t) +
                                    0.02 * (static_cast<double>(seed >> 8) / 16777216.0 - 0.5));
    }
  }
  if (!dump.empty()) {
    const sotto::audio::MelFeatures mel = sotto::audio::nemo_log_mel(audio);
    const sotto::nn::Tensor enc = (*model)->encode(mel.data, mel.n_frames);
    const sotto::asr::TdtResult out = (*model)->decode(enc);
    const auto elements = static_cast<size_t>(enc.elements());
    if (!write_floats(dump + "/audio.f32", audio.data(), audio.size()) ||
        !write_floats(dump + "/mel.f32", mel.data.data(), mel.data.size()) ||
        !write_floats(dump + "/encoder.f32", enc.f32(), elements))
      return std::fprintf(stderr, "cannot write to %s\n", dump.c_str()), 1;
    std::ofstream(dump + "/result.json")
        << "{\"mel_frames\":" << mel.n_frames << ",\"encoder_frames\":" << enc.dim(0)
        << ",\"d_model\":" << enc.dim(1) << ",\"tokens\":" << json_ints(out.tokens)
        << ",\"frames\":" << json_ints(out.frames) << ",\"durations\":" << json_ints(out.durations) << "}\n";
    std::printf("wrote %s/mel.f32, encoder.f32, result.json (%zu tokens)\n", dump.c_str(), out.tokens.size());
  }
  if (serve) {
    std::fflush(stdout);
    for (std::string line; std::getline(std::cin, line);) {
      if (line != "run") {
        std::printf("{\"error\":\"unknown command\"}\n");
        std::fflush(stdout);
        continue;
      }
      auto t0 = std::chrono::steady_clock::now();
      double c0 = cpu_ms();
      const sotto::audio::MelFeatures mel = sotto::audio::nemo_log_mel(audio);
      const double mel_ms = ms_since(t0), mel_cpu = cpu_ms() - c0;
      t0 = std::chrono::steady_clock::now();
      c0 = cpu_ms();
      const sotto::nn::Tensor enc = (*model)->encode(mel.data, mel.n_frames);
      const double enc_ms = ms_since(t0), enc_cpu = cpu_ms() - c0;
      t0 = std::chrono::steady_clock::now();
      c0 = cpu_ms();
      const sotto::asr::TdtResult out = (*model)->decode(enc);
      const double dec_ms = ms_since(t0), dec_cpu = cpu_ms() - c0;
      std::printf(
          "{\"mel_ms\":%.3f,\"mel_cpu_ms\":%.3f,\"encode_ms\":%.3f,\"encode_cpu_ms\":%.3f,\"decode_ms\":%.3f,"
          "\"decode_cpu_ms\":%.3f,\"tokens\":%s}\n",
          mel_ms, mel_cpu, enc_ms, enc_cpu, dec_ms, dec_cpu, json_ints(out.tokens).c_str());
      std::fflush(stdout);
    }
    return 0;
  }
  double best_mel = 1e30, best_enc = 1e30, best_dec = 1e30;
  std::vector<double> enc_cpu;
  size_t n_tokens = 0;
  int64_t n_frames = 0;
  for (int r = 0; r <= runs; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    const sotto::audio::MelFeatures mel = sotto::audio::nemo_log_mel(audio);
    const double mel_ms = ms_since(t0);
    t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_ms();
    const sotto::nn::Tensor enc = (*model)->encode(mel.data, mel.n_frames);
    const double enc_ms = ms_since(t0);
    if (r > 0) enc_cpu.push_back(cpu_ms() - c0);
    t0 = std::chrono::steady_clock::now();
    const sotto::asr::TdtResult out = (*model)->decode(enc);
    const double dec_ms = ms_since(t0);
    n_tokens = out.tokens.size();
    n_frames = enc.dim(0);
    if (r == 0) continue;  // warm-up (first touches of the weights, pooled buffers)
    best_mel = std::min(best_mel, mel_ms);
    best_enc = std::min(best_enc, enc_ms);
    best_dec = std::min(best_dec, dec_ms);
  }
  std::printf(
      "%.1f s clip, %d threads, best of %d: mel %.1f ms, encoder %.1f ms (%lld frames), decoder %.1f ms "
      "(%zu tokens), total %.1f ms\n",
      seconds, threads, runs, best_mel, best_enc, static_cast<long long>(n_frames), best_dec, n_tokens,
      best_mel + best_enc + best_dec);
  std::sort(enc_cpu.begin(), enc_cpu.end());
  if (!enc_cpu.empty())
    std::printf("encoder CPU time (all threads), median of %zu: %.1f ms\n", enc_cpu.size(),
                enc_cpu[enc_cpu.size() / 2]);
  return 0;
}
