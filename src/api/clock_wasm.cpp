#include "api/clock.h"

// performance.now() from JS (web/runtime.js makeImports): wasm has no clock of its own.
extern "C" __attribute__((import_module("env"), import_name("sotto_js_now_ms"))) double sotto_js_now_ms();

namespace sotto {
double now_ms() {
  return sotto_js_now_ms();
}
}  // namespace sotto
