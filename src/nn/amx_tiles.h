// AMX's tile configuration, shared by the tile kernels (conv_integer_amx_avx2.cpp, gemm_bf16_amx_avx2.cpp):
// every kernel here uses all eight tiles at their full size, 16 rows of 64 bytes. Include only from files built
// for x86-64 (*_avx2.cpp), and call only where cpu_features() says the CPU has AMX and Linux granted its state.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace sotto::nn::cpu {

// Loads the configuration (palette 1, tiles 0-7 at 16 x 64 bytes) for this thread; _tile_release() ends it.
__attribute__((target("amx-tile"))) inline void load_full_tiles() {
  struct alignas(64) {
    uint8_t palette = 1;
    uint8_t start_row = 0;
    uint8_t reserved[14] = {};
    uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
    uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
  } config;
  _tile_loadconfig(&config);
}

}  // namespace sotto::nn::cpu
