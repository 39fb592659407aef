// The compiler runtime's complex multiplies, which clang calls for std::complex<float> products (nn's
// stft_onnxruntime.cpp) and std::complex<double> ones (audio/mel.cpp's float64 STFT, Parakeet's front end),
// and this module's link has no compiler-rt for. C99 Annex G's __mulsc3 / __muldc3: the plain
// product, and only when both parts come out NaN the recovery that makes an infinite operand give an infinite
// result (as libgcc's and compiler-rt's do, so wasm and native agree on every input).
#include <cmath>

#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wc99-extensions"
#pragma clang diagnostic ignored "-Wgnu-imaginary-constant"

namespace {

template <class T>
T copysign_box(T inf_or_nan, T sign) {
  return std::copysign(std::isinf(inf_or_nan) ? T{1} : T{0}, sign);
}

template <class T>
struct Parts {
  T re, im;
};

template <class T>
Parts<T> multiply(T a, T b, T c, T d) {
  const T ac = a * c, bd = b * d, ad = a * d, bc = b * c;
  T re = ac - bd, im = ad + bc;
  if (std::isnan(re) && std::isnan(im)) {
    bool recalc = false;
    if (std::isinf(a) || std::isinf(b)) {
      a = copysign_box(a, a);
      b = copysign_box(b, b);
      if (std::isnan(c)) c = std::copysign(T{0}, c);
      if (std::isnan(d)) d = std::copysign(T{0}, d);
      recalc = true;
    }
    if (std::isinf(c) || std::isinf(d)) {
      c = copysign_box(c, c);
      d = copysign_box(d, d);
      if (std::isnan(a)) a = std::copysign(T{0}, a);
      if (std::isnan(b)) b = std::copysign(T{0}, b);
      recalc = true;
    }
    if (!recalc && (std::isinf(ac) || std::isinf(bd) || std::isinf(ad) || std::isinf(bc))) {
      if (std::isnan(a)) a = std::copysign(T{0}, a);
      if (std::isnan(b)) b = std::copysign(T{0}, b);
      if (std::isnan(c)) c = std::copysign(T{0}, c);
      if (std::isnan(d)) d = std::copysign(T{0}, d);
      recalc = true;
    }
    if (recalc) {
      re = static_cast<T>(INFINITY) * (a * c - b * d);
      im = static_cast<T>(INFINITY) * (a * d + b * c);
    }
  }
  return {re, im};
}

}  // namespace

extern "C" _Complex float __mulsc3(float a, float b, float c, float d) {
  const Parts<float> p = multiply<float>(a, b, c, d);
  _Complex float z;
  __real__ z = p.re;
  __imag__ z = p.im;
  return z;
}

extern "C" _Complex double __muldc3(double a, double b, double c, double d) {
  const Parts<double> p = multiply<double>(a, b, c, d);
  _Complex double z;
  __real__ z = p.re;
  __imag__ z = p.im;
  return z;
}

#pragma clang diagnostic pop
