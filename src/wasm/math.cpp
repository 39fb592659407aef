// The libm functions kernels and libc++ headers call, for a wasm build with no libc.
//
// The float versions evaluate in double and round once, so they are within 1 ulp of the true value (the
// double results are good to a few double ulps, far below half a float ulp). Double versions use classic
// range reduction + polynomial: a few ulps, except pow (exp(y*log x): relative error ~|y log x| double ulps)
// and sin/cos/tan beyond |x| ~ 1e6 (the 3-part pi/2 reduction loses bits there; no Payne-Hanek).
// Functions with a wasm instruction (sqrt, floor, ceil, trunc, nearest, abs, min/max) just use it.
// tests/web/node.test.mjs checks them against JS Math on random inputs through sotto_math_eval.
#include <cstdint>
#include <cstring>

namespace {

constexpr double kLn2Hi = 6.93147180369123816490e-01;  // ln 2 split so k*kLn2Hi is exact for |k| < 2^20
constexpr double kLn2Lo = 1.90821492927058770002e-10;
constexpr double kInvLn2 = 1.44269504088896338700e+00;
constexpr double kPi = 3.14159265358979311600e+00;
constexpr double kPiOver2 = 1.57079632679489655800e+00;
constexpr double kPiOver4 = 7.85398163397448278999e-01;

uint64_t bits(double x) {
  uint64_t u;
  memcpy(&u, &x, 8);
  return u;
}
double from_bits(uint64_t u) {
  double x;
  memcpy(&x, &u, 8);
  return x;
}
bool is_nan(double x) {
  return x != x;
}

// x * 2^k for any k a double exponent can need, without overflow in the scale factor itself.
double scale_by_power_of_2(double x, int k) {
  while (k > 1023) x *= 0x1p1023, k -= 1023;
  while (k < -1022) x *= 0x1p-1022, k += 1022;
  return x * from_bits(static_cast<uint64_t>(k + 1023) << 52);
}

double exp_impl(double x) {
  if (is_nan(x)) return x;
  if (x > 709.782712893384) return __builtin_inf();
  if (x < -745.1332191019412) return 0.0;
  // x = k ln2 + r, |r| <= ln2/2; e^r by its Taylor series (degree 13: truncation < 1e-17 relative).
  const double k = __builtin_nearbyint(x * kInvLn2);
  const double r = (x - k * kLn2Hi) - k * kLn2Lo;
  double p = 1.0 / 6227020800.0;  // 1/13!
  constexpr double kInvFactorial[] = {
      1.0 / 479001600, 1.0 / 39916800, 1.0 / 3628800, 1.0 / 362880, 1.0 / 40320, 1.0 / 5040, 1.0 / 720,
      1.0 / 120,       1.0 / 24,       1.0 / 6,       1.0 / 2,      1.0,         1.0};
  for (double c : kInvFactorial) p = p * r + c;
  return scale_by_power_of_2(p, static_cast<int>(k));
}

double expm1_impl(double x) {
  if (__builtin_fabs(x) >= 0.5) return exp_impl(x) - 1.0;
  // Taylor series without the leading 1: keeps full relative precision near 0.
  double p = 1.0 / 355687428096000.0;  // 1/17!
  for (int n = 16; n >= 1; --n) {
    double inv = 1.0;
    for (int i = 2; i <= n; ++i) inv /= i;
    p = p * x + inv;
  }
  return p * x;
}

double log_impl(double x) {
  if (is_nan(x) || x < 0) return __builtin_nan("");
  if (x == 0) return -__builtin_inf();
  if (x == __builtin_inf()) return x;
  int e = 0;
  if (x < 0x1p-1022) x *= 0x1p54, e -= 54;  // subnormal: normalise first
  uint64_t u = bits(x);
  e += static_cast<int>((u >> 52) & 0x7ff) - 1023;
  double m = from_bits((u & 0x000fffffffffffffull) | 0x3ff0000000000000ull);  // [1, 2)
  if (m > 1.4142135623730951) m *= 0.5, ++e;                                  // [sqrt(1/2), sqrt(2))
  // log m = 2 atanh(s), s = (m-1)/(m+1), |s| < 0.172: odd series in s.
  const double f = m - 1.0;
  const double s = f / (2.0 + f);
  const double s2 = s * s;
  double p = 1.0 / 25;
  for (int n = 23; n >= 3; n -= 2) p = p * s2 + 1.0 / n;
  const double log_m = f - s * (f - 2.0 * s2 * p);  // = 2s + 2s^3 p, written to keep f's exact bits
  return e * kLn2Hi + (log_m + e * kLn2Lo);
}

// Reduces x to r in [-pi/4, pi/4] with x = r + q*pi/2; returns q mod 4.
int reduce_pi_over_2(double x, double* r) {
  constexpr double kP1 = 1.57079632673412561417e+00;  // first 33 bits of pi/2
  constexpr double kP2 = 6.07710050630396597660e-11;  // next 33 bits
  constexpr double kP3 = 2.02226624879595063154e-21;  // the rest
  const double q = __builtin_nearbyint(x * (2.0 / kPi));
  *r = ((x - q * kP1) - q * kP2) - q * kP3;
  return static_cast<int>(static_cast<int64_t>(q) & 3);
}

double sin_kernel(double r) {  // |r| <= pi/4, Taylor to r^19
  const double r2 = r * r;
  double p = -1.0 / 121645100408832000.0;
  constexpr double kC[] = {1.0 / 355687428096000, -1.0 / 1307674368000, 1.0 / 6227020800, -1.0 / 39916800,
                           1.0 / 362880,          -1.0 / 5040,          1.0 / 120,        -1.0 / 6};
  for (double c : kC) p = p * r2 + c;
  return r + r * r2 * p;
}

double cos_kernel(double r) {  // |r| <= pi/4, Taylor to r^20
  const double r2 = r * r;
  double p = 1.0 / 2432902008176640000.0;
  constexpr double kC[] = {-1.0 / 6402373705728000, 1.0 / 20922789888000, -1.0 / 87178291200, 1.0 / 479001600,
                           -1.0 / 3628800,          1.0 / 40320,          -1.0 / 720,         1.0 / 24};
  for (double c : kC) p = p * r2 + c;
  return 1.0 - 0.5 * r2 + r2 * r2 * p;
}

double sin_impl(double x) {
  if (is_nan(x) || __builtin_isinf(x)) return __builtin_nan("");
  if (__builtin_fabs(x) <= kPiOver4) return sin_kernel(x);
  double r;
  switch (reduce_pi_over_2(x, &r)) {
    case 0:
      return sin_kernel(r);
    case 1:
      return cos_kernel(r);
    case 2:
      return -sin_kernel(r);
    default:
      return -cos_kernel(r);
  }
}

double cos_impl(double x) {
  if (is_nan(x) || __builtin_isinf(x)) return __builtin_nan("");
  if (__builtin_fabs(x) <= kPiOver4) return cos_kernel(x);
  double r;
  switch (reduce_pi_over_2(x, &r)) {
    case 0:
      return cos_kernel(r);
    case 1:
      return -sin_kernel(r);
    case 2:
      return -cos_kernel(r);
    default:
      return sin_kernel(r);
  }
}

double tanh_impl(double x) {
  if (is_nan(x)) return x;
  const double a = __builtin_fabs(x);
  if (a > 22) return x > 0 ? 1.0 : -1.0;
  const double t = expm1_impl(2 * a);
  const double y = t / (t + 2.0);
  return x < 0 ? -y : y;
}

bool is_integer(double y) {
  return __builtin_trunc(y) == y;
}
bool is_odd_integer(double y) {
  return is_integer(y) && __builtin_fabs(y) < 0x1p53 && __builtin_trunc(y * 0.5) * 2.0 != y;
}

double pow_impl(double x, double y) {
  if (y == 0 || x == 1) return 1.0;
  if (is_nan(x) || is_nan(y)) return __builtin_nan("");
  if (x == 0) {
    if (y < 0) return is_odd_integer(y) ? __builtin_copysign(__builtin_inf(), x) : __builtin_inf();
    return is_odd_integer(y) ? x : 0.0;
  }
  if (__builtin_isinf(y)) {
    const double a = __builtin_fabs(x);
    if (a == 1) return 1.0;
    return (a > 1) == (y > 0) ? __builtin_inf() : 0.0;
  }
  if (__builtin_isinf(x)) {
    if (x > 0) return y > 0 ? x : 0.0;
    const double mag = y > 0 ? __builtin_inf() : 0.0;
    return is_odd_integer(y) ? -mag : mag;
  }
  // Small integer powers by repeated squaring: exact where the result is representable (x^2, x^3 in kernels).
  if (is_integer(y) && __builtin_fabs(y) <= 64) {
    int n = static_cast<int>(__builtin_fabs(y));
    double base = x, result = 1.0;
    for (; n; n >>= 1, base *= base) {
      if (n & 1) result *= base;
    }
    return y < 0 ? 1.0 / result : result;
  }
  double sign = 1.0;
  if (x < 0) {
    if (!is_integer(y)) return __builtin_nan("");
    if (is_odd_integer(y)) sign = -1.0;
    x = -x;
  }
  return sign * exp_impl(y * log_impl(x));
}

double atan_impl(double x) {
  if (is_nan(x)) return x;
  const bool negative = x < 0;
  double a = __builtin_fabs(x);
  double offset = 0;
  bool invert = false;
  if (a > 1) a = 1.0 / a, invert = true;
  if (a > 0.41421356237309503) {  // tan(pi/8): shift by pi/4 so the series argument stays below 0.415
    a = (a - 1.0) / (a + 1.0);
    offset = kPiOver4;
  }
  const double a2 = a * a;
  double p = 0;
  for (int n = 45; n >= 3; n -= 2) p = (((n - 1) / 2) % 2 ? -1.0 : 1.0) / n + a2 * p;  // -1/3 + a2/5 - ...
  double r = offset + (a + a * a2 * p);
  if (invert) r = kPiOver2 - r;
  return negative ? -r : r;
}

double atan2_impl(double y, double x) {
  if (is_nan(x) || is_nan(y)) return __builtin_nan("");
  if (x == 0 && y == 0) return __builtin_signbit(x) ? __builtin_copysign(kPi, y) : __builtin_copysign(0.0, y);
  if (__builtin_isinf(x) && __builtin_isinf(y)) {
    const double a = x > 0 ? kPiOver4 : 3 * kPiOver4;
    return __builtin_copysign(a, y);
  }
  if (x == 0 || __builtin_isinf(y)) return __builtin_copysign(kPiOver2, y);
  if (__builtin_isinf(x)) return x > 0 ? __builtin_copysign(0.0, y) : __builtin_copysign(kPi, y);
  const double a = atan_impl(y / x);
  if (x > 0) return a;
  return y >= 0 ? a + kPi : a - kPi;
}

double erf_impl(double x) {
  if (is_nan(x)) return x;
  const double a = __builtin_fabs(x);
  double r;
  if (a < 2.5) {
    // erf x = 2/sqrt(pi) sum (-1)^n x^(2n+1) / (n! (2n+1)); terms peak near 16 at x = 2.5, so double keeps
    // ~1e-15 absolute accuracy.
    const double a2 = a * a;
    double term = a, sum = a;
    for (int n = 1; n < 60; ++n) {
      term *= -a2 / n;
      sum += term / (2 * n + 1);
    }
    r = 1.1283791670955126 * sum;
  } else if (a < 6) {
    // erfc by its continued fraction (Lentz), then 1 - erfc.
    double f = a, c = a, d = 0;
    for (int n = 1; n < 80; ++n) {
      const double an = n * 0.5;
      d = a + an * d;
      d = 1.0 / d;
      c = a + an / c;
      f *= c * d;
    }
    r = 1.0 - exp_impl(-a * a) / (f * 1.7724538509055159);
  } else {
    r = 1.0;
  }
  return x < 0 ? -r : r;
}

}  // namespace

extern "C" {

double exp(double x) {
  return exp_impl(x);
}
double exp2(double x) {
  // Split off the integer part exactly so large |x| does not amplify the rounding of x * ln 2.
  if (is_nan(x) || __builtin_fabs(x) > 2000) return exp_impl(x * 6.93147180559945309417e-01);
  const double k = __builtin_nearbyint(x);
  return scale_by_power_of_2(exp_impl((x - k) * 6.93147180559945309417e-01), static_cast<int>(k));
}
double expm1(double x) {
  return expm1_impl(x);
}
double log(double x) {
  return log_impl(x);
}
double log2(double x) {
  return log_impl(x) * kInvLn2;
}
double log10(double x) {
  return log_impl(x) * 4.34294481903251827651e-01;
}
double log1p(double x) {
  // log(u) * x / (u - 1) with u = 1 + x cancels the rounding of u (Goldberg's trick).
  const double u = 1 + x;
  if (u == 1) return x;
  return x > -0.5 && x < 0.5 ? log_impl(u) * (x / (u - 1)) : log_impl(u);
}
double sin(double x) {
  return sin_impl(x);
}
double cos(double x) {
  return cos_impl(x);
}
double tan(double x) {
  return sin_impl(x) / cos_impl(x);
}
double tanh(double x) {
  return tanh_impl(x);
}
double atan(double x) {
  return atan_impl(x);
}
double atan2(double y, double x) {
  return atan2_impl(y, x);
}
double erf(double x) {
  return erf_impl(x);
}
double pow(double x, double y) {
  return pow_impl(x, y);
}
double sqrt(double x) {
  return __builtin_sqrt(x);
}
double fabs(double x) {
  return __builtin_fabs(x);
}
double floor(double x) {
  return __builtin_floor(x);
}
double ceil(double x) {
  return __builtin_ceil(x);
}
double trunc(double x) {
  return __builtin_trunc(x);
}
double rint(double x) {
  return __builtin_nearbyint(x);
}
double nearbyint(double x) {
  return __builtin_nearbyint(x);
}
double round(double x) {  // halves away from zero
  const double t = __builtin_trunc(x);
  return __builtin_fabs(x - t) >= 0.5 ? t + __builtin_copysign(1.0, x) : t;
}
double fmin(double a, double b) {
  return is_nan(a) ? b : (is_nan(b) ? a : (b < a ? b : a));
}
double fmax(double a, double b) {
  return is_nan(a) ? b : (is_nan(b) ? a : (b > a ? b : a));
}
double fmod(double x, double y) {
  if (is_nan(x) || is_nan(y) || __builtin_isinf(x) || y == 0) return __builtin_nan("");
  if (__builtin_isinf(y) || x == 0) return x;
  // Long division by repeated subtraction of y * 2^k: exact, as fmod must be.
  double r = __builtin_fabs(x);
  const double ay = __builtin_fabs(y);
  while (r >= ay) {
    double d = ay;
    while (d * 2 <= r && d * 2 < __builtin_inf()) d *= 2;
    r -= d;
  }
  return __builtin_copysign(r, x);
}
long lrint(double x) {
  return static_cast<long>(__builtin_nearbyint(x));
}
long lround(double x) {
  return static_cast<long>(round(x));
}

float expf(float x) {
  return static_cast<float>(exp_impl(x));
}
float exp2f(float x) {
  return static_cast<float>(exp2(x));
}
float expm1f(float x) {
  return static_cast<float>(expm1_impl(x));
}
float logf(float x) {
  return static_cast<float>(log_impl(x));
}
float log2f(float x) {
  return static_cast<float>(log_impl(x) * kInvLn2);
}
float log10f(float x) {
  return static_cast<float>(log_impl(x) * 4.34294481903251827651e-01);
}
float log1pf(float x) {
  return static_cast<float>(log1p(x));
}
float sinf(float x) {
  return static_cast<float>(sin_impl(x));
}
float cosf(float x) {
  return static_cast<float>(cos_impl(x));
}
float tanf(float x) {
  return static_cast<float>(sin_impl(x) / cos_impl(x));
}
float tanhf(float x) {
  return static_cast<float>(tanh_impl(x));
}
float atanf(float x) {
  return static_cast<float>(atan_impl(x));
}
float atan2f(float y, float x) {
  return static_cast<float>(atan2_impl(y, x));
}
float erff(float x) {
  return static_cast<float>(erf_impl(x));
}
float powf(float x, float y) {
  return static_cast<float>(pow_impl(x, y));
}
float sqrtf(float x) {
  return __builtin_sqrtf(x);
}
float fabsf(float x) {
  return __builtin_fabsf(x);
}
float floorf(float x) {
  return __builtin_floorf(x);
}
float ceilf(float x) {
  return __builtin_ceilf(x);
}
float truncf(float x) {
  return __builtin_truncf(x);
}
float rintf(float x) {
  return __builtin_nearbyintf(x);
}
float nearbyintf(float x) {
  return __builtin_nearbyintf(x);
}
float roundf(float x) {
  return static_cast<float>(round(x));
}
float fminf(float a, float b) {
  return static_cast<float>(fmin(a, b));
}
float fmaxf(float a, float b) {
  return static_cast<float>(fmax(a, b));
}
float fmodf(float x, float y) {
  return static_cast<float>(fmod(x, y));
}
long lrintf(float x) {
  return static_cast<long>(__builtin_nearbyintf(x));
}
long lroundf(float x) {
  return static_cast<long>(round(x));
}

// For tests: out[i] = f(x[i], y[i]) for the function numbered `which` (see MATH_FUNCTIONS in tests/web).
// Float functions read and write float arrays; double ones double arrays. Returns 0 for an unknown number.
__attribute__((export_name("sotto_math_eval"))) int sotto_math_eval(int which, const void* x, const void* y,
                                                                    void* out, int n) {
  using F1 = float (*)(float);
  using D1 = double (*)(double);
  static const F1 kFloat1[] = {expf, logf, sinf, cosf, tanhf, sqrtf, exp2f, log2f, atanf, erff, expm1f, tanf};
  static const D1 kDouble1[] = {exp, log, sin, cos, tanh, sqrt, exp2, log2, atan, erf, expm1, tan};
  constexpr int kN1 = sizeof kFloat1 / sizeof kFloat1[0];
  const float* xf = static_cast<const float*>(x);
  const float* yf = static_cast<const float*>(y);
  const double* xd = static_cast<const double*>(x);
  const double* yd = static_cast<const double*>(y);
  float* of = static_cast<float*>(out);
  double* od = static_cast<double*>(out);
  for (int i = 0; i < n; ++i) {
    if (which < kN1) {
      of[i] = kFloat1[which](xf[i]);
    } else if (which < 2 * kN1) {
      od[i] = kDouble1[which - kN1](xd[i]);
    } else if (which == 2 * kN1) {
      of[i] = powf(xf[i], yf[i]);
    } else if (which == 2 * kN1 + 1) {
      od[i] = pow(xd[i], yd[i]);
    } else if (which == 2 * kN1 + 2) {
      of[i] = atan2f(xf[i], yf[i]);
    } else if (which == 2 * kN1 + 3) {
      od[i] = atan2(xd[i], yd[i]);
    } else {
      return 0;
    }
  }
  return 1;
}

}  // extern "C"
