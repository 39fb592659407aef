// The compiler runtime's complex multiply, which clang calls for std::complex<float> products (nn's
// stft_onnxruntime.cpp) and this module's link has no compiler-rt for. C99 Annex G's __mulsc3: the plain
// product, and only when both parts come out NaN the recovery that makes an infinite operand give an infinite
// result (as libgcc's and compiler-rt's do, so wasm and native agree on every input).
#include <cmath>

#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wc99-extensions"
#pragma clang diagnostic ignored "-Wgnu-imaginary-constant"

namespace {

float copysign_box(float inf_or_nan, float sign) {
  return std::copysign(std::isinf(inf_or_nan) ? 1.0f : 0.0f, sign);
}

}  // namespace

extern "C" _Complex float __mulsc3(float a, float b, float c, float d) {
  const float ac = a * c, bd = b * d, ad = a * d, bc = b * c;
  float re = ac - bd, im = ad + bc;
  if (std::isnan(re) && std::isnan(im)) {
    bool recalc = false;
    if (std::isinf(a) || std::isinf(b)) {
      a = copysign_box(a, a);
      b = copysign_box(b, b);
      if (std::isnan(c)) c = std::copysign(0.0f, c);
      if (std::isnan(d)) d = std::copysign(0.0f, d);
      recalc = true;
    }
    if (std::isinf(c) || std::isinf(d)) {
      c = copysign_box(c, c);
      d = copysign_box(d, d);
      if (std::isnan(a)) a = std::copysign(0.0f, a);
      if (std::isnan(b)) b = std::copysign(0.0f, b);
      recalc = true;
    }
    if (!recalc && (std::isinf(ac) || std::isinf(bd) || std::isinf(ad) || std::isinf(bc))) {
      if (std::isnan(a)) a = std::copysign(0.0f, a);
      if (std::isnan(b)) b = std::copysign(0.0f, b);
      if (std::isnan(c)) c = std::copysign(0.0f, c);
      if (std::isnan(d)) d = std::copysign(0.0f, d);
      recalc = true;
    }
    if (recalc) {
      re = INFINITY * (a * c - b * d);
      im = INFINITY * (a * d + b * c);
    }
  }
  _Complex float z;
  __real__ z = re;
  __imag__ z = im;
  return z;
}

#pragma clang diagnostic pop
