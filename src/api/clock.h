// Milliseconds from a monotonic clock, for timings: steady_clock natively (clock_native.cpp), the page's
// performance.now() in WebAssembly (clock_wasm.cpp). The portable core has no clock of its own.
#pragma once

namespace sotto {
double now_ms();
}
