// Functions the JS side provides to the module (imported from "env"): text out, and a fatal stop that throws
// a JS Error carrying the message, so a wasm abort surfaces as a readable exception in the worker.
#pragma once

#include <cstddef>

extern "C" {
__attribute__((import_module("env"), import_name("sotto_js_log"))) void sotto_js_log(const char* text,
                                                                                     size_t bytes);
[[noreturn]] __attribute__((import_module("env"), import_name("sotto_js_abort"))) void sotto_js_abort(
    const char* text, size_t bytes);
}
