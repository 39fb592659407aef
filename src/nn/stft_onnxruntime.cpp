// nn::stft_onnxruntime (see nn/ops.h): ONNX Runtime's CPU STFT, operation for operation in float: a radix-2
// FFT with its bit-reversed twiddle table (angles from pi = 3.14159265f), and for other lengths Bluestein's
// chirp-z transform through radix-2 FFTs of the next power of two >= 2 n - 1, the inverse one reusing the
// forward twiddles and reading its output reversed. Why not a plain DFT: in exact arithmetic the DC and Nyquist
// bins of a real signal have an imaginary part of 0; these algorithms leave rounding noise there, whose sign
// decides whether the phase is +pi or -pi, and a vocoder that reads the phase (Kokoro's iSTFTNet) hears it.
// Time: ~3 FFTs of 64 points per frame for n_fft 20 (Kokoro: 120 frames per 25 ms of audio): ~25 ms of one
// core for a 1.2 s sentence (std::complex products with their NaN checks), all before the first streamed
// chunk, so the frames go over the threads.
#include <cassert>
#include <cmath>
#include <complex>
#include <cstring>
#include <vector>

#include "nn/cpu.h"
#include "nn/gpu_ops.h"
#include "nn/ops.h"

namespace sotto::nn {

namespace {

using Complex = std::complex<float>;

uint32_t bit_reverse(uint32_t v, unsigned bits) {
  uint32_t r = 0;
  for (unsigned b = 0; b < bits; ++b) r |= ((v >> b) & 1u) << (bits - 1 - b);
  return r;
}

unsigned log2_exact(size_t n) {
  unsigned bits = 0;
  while ((size_t{1} << bits) < n) ++bits;
  return bits;
}

// ONNX Runtime's radix-2 FFT twiddles: entry bit_reverse(i) = exp(i * (-2 pi / n)) with its float pi.
std::vector<Complex> twiddles(size_t n) {
  const float pi = 3.14159265f;
  const float tau = 2 * pi;
  const float angular_velocity = -1.0f * tau / static_cast<float>(n);
  std::vector<Complex> v(n);
  const unsigned bits = log2_exact(n);
  for (size_t i = 0; i < n; ++i) {
    const float angle = static_cast<float>(i) * angular_velocity;
    v[bit_reverse(static_cast<uint32_t>(i), bits)] = Complex(std::cos(angle), std::sin(angle));
  }
  return v;
}

// In-place radix-2 decimation in time on x[n] (n a power of two) loaded in bit-reversed order from `in`.
void fft_radix2(const Complex* in, size_t n_in, const float* window, size_t n, const std::vector<Complex>& v,
                Complex* out) {
  const unsigned bits = log2_exact(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t j = bit_reverse(static_cast<uint32_t>(i), bits);
    const Complex x = j < n_in ? in[j] : Complex(0, 0);
    const float w = window ? window[j] : 1.0f;
    out[i] = Complex(1, 0) * x * Complex(w, 0);
  }
  unsigned current_bits = 0;
  for (size_t size = 2; size <= n; size <<= 1) {
    const size_t mid = size >> 1;
    ++current_bits;
    for (size_t k = 0; k < mid; ++k) {
      const Complex& first_w = v[bit_reverse(static_cast<uint32_t>(k), current_bits)];
      const Complex& second_w = v[bit_reverse(static_cast<uint32_t>(mid + k), current_bits)];
      for (size_t j = 0; j < n; j += size) {
        Complex& even = out[k + j];
        Complex& odd = out[k + j + mid];
        const Complex first = even + first_w * odd;
        const Complex second = even + second_w * odd;
        even = first;
        odd = second;
      }
    }
  }
}

}  // namespace

namespace {

// Bluestein's tables for n points (n not a power of two): chirp c[k] = exp(-i pi k^2 / n); b = conj(c) mirrored
// to the end of m points (m the next power of two >= 2 n - 1) and transformed; the m-point twiddles, which the
// inverse transform reuses (ONNX Runtime's cache). The CPU op and the GPU's STFT kernel use the same tables.
struct Bluestein {
  size_t m = 1;
  std::vector<Complex> chirp, v, b_fft;
};

Bluestein bluestein_tables(size_t n) {
  Bluestein t;
  while (t.m <= 2 * n - 2) t.m <<= 1;
  const float pi = static_cast<float>(3.14159265358979323846);  // M_PI as float
  std::vector<Complex> b(t.m, Complex(0, 0));
  t.chirp.resize(n);
  t.b_fft.resize(t.m);
  for (size_t k = 0; k < n; ++k) {
    const float exponent = -1.0f * pi * static_cast<float>(k) * static_cast<float>(k) / static_cast<float>(n);
    t.chirp[k] = Complex(std::cos(exponent), std::sin(exponent));
    b[k] = std::conj(t.chirp[k]);
  }
  for (size_t k = t.m - n + 1; k < t.m; ++k) b[k] = b[t.m - k];
  t.v = twiddles(t.m);
  fft_radix2(b.data(), t.m, nullptr, t.m, t.v, t.b_fft.data());
  return t;
}

}  // namespace

// The Bluestein tables (gpu_kokoro.cpp's STFT kernel reads them), each as interleaved (re, im) floats: chirp [n],
// twiddles [m], the chirp filter's transform [m]; m = 0 when n is a power of two (not handled there).
void stft_onnxruntime_tables(int n_fft, std::vector<float>& chirp_out, std::vector<float>& twiddles_out,
                             std::vector<float>& b_fft_out, int& m_out) {
  const size_t n = static_cast<size_t>(n_fft);
  m_out = 0;
  if ((n & (n - 1)) == 0) return;
  const Bluestein t = bluestein_tables(n);
  auto flat = [](const std::vector<Complex>& c, std::vector<float>& out) {
    out.resize(2 * c.size());
    for (size_t i = 0; i < c.size(); ++i) out[2 * i] = c[i].real(), out[2 * i + 1] = c[i].imag();
  };
  flat(t.chirp, chirp_out);
  flat(t.v, twiddles_out);
  flat(t.b_fft, b_fft_out);
  m_out = static_cast<int>(t.m);
}

Tensor stft_onnxruntime(const Tensor& signal, const Tensor& window, int n_fft, int hop) {
  if (gpu_ops::on_gpu(signal)) return gpu_ops::stft_onnxruntime(signal, window, n_fft, hop);
  assert(signal.rank() == 1 && signal.dtype() == DType::F32 && window.elements() == n_fft);
  assert(signal.ctx().backend() == Backend::Cpu);
  const size_t n = static_cast<size_t>(n_fft);
  const int64_t length = signal.dim(0);
  const int64_t frames = (length - n_fft) / hop + 1;
  const int64_t bins = n_fft / 2 + 1;
  Tensor out = signal.ctx().empty({2, bins, frames});
  const float* x = signal.f32();
  const float* win = window.f32();
  float* re = out.f32();
  float* im = out.f32() + bins * frames;
  std::vector<Complex> frame(n), spectrum;

  if ((n & (n - 1)) == 0) {  // power of two: the FFT directly, window applied as the frame is loaded
    const std::vector<Complex> v = twiddles(n);
    spectrum.resize(n);
    for (int64_t t = 0; t < frames; ++t) {
      for (size_t i = 0; i < n; ++i) frame[i] = Complex(x[t * hop + static_cast<int64_t>(i)], 0);
      fft_radix2(frame.data(), n, win, n, v, spectrum.data());
      for (int64_t k = 0; k < bins; ++k) {
        re[k * frames + t] = spectrum[k].real();
        im[k * frames + t] = spectrum[k].imag();
      }
    }
    return out;
  }

  // Bluestein: X = c . (a * b), with the tables of bluestein_tables.
  const Bluestein tables = bluestein_tables(n);
  const size_t m = tables.m;
  const std::vector<Complex>& chirp = tables.chirp;
  const std::vector<Complex>& v = tables.v;
  const std::vector<Complex>& b_fft = tables.b_fft;

  // Frames are independent: over the threads, each with its own buffers (the same arithmetic per frame).
  cpu::parallel_for(signal.ctx(), frames, static_cast<int64_t>(8 * m), [&](int64_t begin, int64_t end) {
    std::vector<Complex> a(m), a_fft(m);
    for (int64_t t = begin; t < end; ++t) {
      std::fill(a.begin(), a.end(), Complex(0, 0));
      for (size_t k = 0; k < n; ++k) {
        Complex ak = x[t * hop + static_cast<int64_t>(k)];
        ak *= win[k];
        ak *= chirp[k];
        a[k] = ak;
      }
      fft_radix2(a.data(), m, nullptr, m, v, a_fft.data());
      for (size_t k = 0; k < m; ++k) a_fft[k] *= b_fft[k];
      fft_radix2(a_fft.data(), m, nullptr, m, v,
                 a.data());  // forward twiddles: the output comes out reversed
      for (size_t k = 0; k < m; ++k) a[k] /= static_cast<float>(m);
      for (int64_t k = 0; k < bins; ++k) {
        const Complex c = k == 0 ? a[0] : a[m - static_cast<size_t>(k)];
        const Complex y = c * chirp[static_cast<size_t>(k)] * 1.0f;
        re[k * frames + t] = y.real();
        im[k * frames + t] = y.imag();
      }
    }
  });
  return out;
}

}  // namespace sotto::nn
