// CPUID detection of AVX2 + FMA + F16C (what the *_avx2.cpp files are compiled for), plus the OS check that
// YMM state is saved on context switches (XGETBV), without which AVX instructions fault; then AVX-512 (VNNI,
// and the vendor for the f32 kernel's rule) and AMX.
#include <cstdlib>
#include <cstring>

#include "cpu/cpu_features.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace sotto {

CpuFeatures detect_cpu_features() {
  CpuFeatures f;
  const char* forced = std::getenv("SOTTO_CPU");
  if (forced && std::strcmp(forced, "portable") == 0) return f;
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
  const unsigned base_family = (eax >> 8) & 0xfu,
                 family = base_family + (base_family == 0xfu ? (eax >> 20) & 0xffu : 0u);
  const bool fma = ecx & (1u << 12), osxsave = ecx & (1u << 27), avx = ecx & (1u << 28),
             f16c = ecx & (1u << 29);
  if (!(fma && osxsave && avx && f16c)) return f;
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & 6u) != 6u) return f;  // XMM and YMM state enabled by the OS
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return f;
  f.avx2_fma = ebx & (1u << 5);
  const bool avx512 = (ebx & (1u << 16)) && (ebx & (1u << 30)) && (ebx & (1u << 31)),  // F, BW, VL
      vnni = ecx & (1u << 11);
  const bool zmm_state = (xcr0_lo & 0xe0u) == 0xe0u;  // opmask, ZMM 0-15 upper halves, ZMM 16-31
  // SOTTO_CPU=avx2 keeps to the AVX2 kernels (to compare the two).
  const bool avx2_only = forced && std::strcmp(forced, "avx2") == 0;
  f.avx512_vnni = f.avx2_fma && avx512 && vnni && zmm_state && !avx2_only;
  unsigned max_leaf = 0, vendor[3] = {};
  __get_cpuid(0, &max_leaf, &vendor[0], &vendor[2], &vendor[1]);  // "Genu" "ineI" "ntel" in ebx, edx, ecx
  const bool intel = std::memcmp(vendor, "GenuineIntel", 12) == 0;
  // AMD's Zen 5 (family 0x1A) has full-width 512-bit FMA units, unlike Zen 4 (0x19).
  const bool amd_full_width = std::memcmp(vendor, "AuthenticAMD", 12) == 0 && family >= 0x1a;
  f.avx512_f32 = f.avx2_fma && avx512 && zmm_state && (intel || amd_full_width) && !avx2_only;
  f.amx_int8 = f.avx512_f32 && (edx & (1u << 24)) && (edx & (1u << 25));  // AMX-TILE, AMX-INT8
  f.amx_bf16 = f.avx512_f32 && (edx & (1u << 24)) && (edx & (1u << 22));  // AMX-TILE, AMX-BF16
  unsigned eax1 = 0, ebx1 = 0, ecx1 = 0, edx1 = 0;
  if (!__get_cpuid_count(7, 1, &eax1, &ebx1, &ecx1, &edx1) || !(eax1 & (1u << 5)))
    f.amx_bf16 = false;  // AVX512-BF16
  if (f.amx_int8 || f.amx_bf16) {
    // XTILECFG and XTILEDATA in XCR0, then the process-wide permission for the tile data.
#if defined(__linux__)
    constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    const bool granted =
        (xcr0_lo & 0x60000u) == 0x60000u && syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
#else
    const bool granted = false;  // other systems' tile-state grant is not wired up
#endif
    if (!granted) f.amx_int8 = f.amx_bf16 = false;
  }
#endif
  return f;
}

}  // namespace sotto
