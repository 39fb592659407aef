# The WebAssembly build: one sotto.wasm in the binary directory (build/wasm-simd128/ or build/wasm-relaxed/),
# loaded by web/engine.js onto a shared WebAssembly.Memory that the engine worker and every pool helper
# instantiate the module on. Included by CMakeLists.txt, which has already chosen SOTTO_SOURCES for wasm.
#
# Linking notes:
#   --import-memory --shared-memory   the memory comes from JS, shared by all workers; wasm-ld's start function
#                                     fills the data segments once (an atomic flag in memory) per memory.
#   --initial-memory=16 MiB           must match INITIAL_PAGES in web/runtime.js; the heap grows from there.
#   -z stack-size=1 MiB               thread 0's stack; helpers get stacks of the same size from the heap.
#   --no-check-features               libc++.a was built without atomics; we only take thread-free pieces.
#   no wasm-opt: Debian's binaryen cannot parse relaxed-SIMD opcodes.
if(NOT SOTTO_WASM_VARIANT MATCHES "^(simd128|relaxed)$")
  message(FATAL_ERROR "SOTTO_WASM_VARIANT must be simd128 or relaxed, not '${SOTTO_WASM_VARIANT}'")
endif()
if(NOT DEFINED SOTTO_WASM_LIBCXX_INCLUDE)
  message(FATAL_ERROR "configure the wasm build with the toolchain file cmake/wasm32-clang19.cmake (or a wasm-* preset)")
endif()

set(SOTTO_WASM_FLAGS -fno-exceptions -fno-rtti -matomics -mbulk-memory -msimd128 -O2)
if(SOTTO_WASM_VARIANT STREQUAL "relaxed")
  list(APPEND SOTTO_WASM_FLAGS -mrelaxed-simd)
endif()

add_library(sotto_wasm_objects OBJECT ${SOTTO_SOURCES})
target_include_directories(sotto_wasm_objects PRIVATE ${CMAKE_SOURCE_DIR}/src)
target_include_directories(sotto_wasm_objects SYSTEM PRIVATE ${SOTTO_WASM_LIBCXX_INCLUDE} ${SOTTO_WASM_SYSROOT_INCLUDE})
target_compile_options(sotto_wasm_objects PRIVATE ${SOTTO_WASM_FLAGS} ${SOTTO_WARNINGS})
# The allocator and mem*/str*/math implementations must not be "optimised" into calls to themselves.
set_source_files_properties(${CMAKE_SOURCE_DIR}/src/wasm/libc.cpp ${CMAKE_SOURCE_DIR}/src/wasm/math.cpp
                            PROPERTIES COMPILE_OPTIONS "-fno-builtin")

# Every function of the C API (src/api/sotto.h) is exported under its own name, read from the header, so the
# API needs no wrapper per function (size_t is 32 bits in wasm32, as JS passes it). src/wasm/exports.cpp adds
# what only the web has (memory, the thread pool, self-tests) and its own sotto_llm_create, which puts handles
# on the engine's pool; sotto_llm_create_on_pool is C++ (a ThreadPool*), for that one (and the TTS's and ASR's).
file(STRINGS ${CMAKE_SOURCE_DIR}/src/api/sotto.h SOTTO_API_DECLARATIONS REGEX "^[A-Za-z].*[ *]sotto_[a-z0-9_]+\\(")
set(SOTTO_API_EXPORTS)
foreach(declaration ${SOTTO_API_DECLARATIONS})
  string(REGEX MATCH "sotto_[a-z0-9_]+\\(" name "${declaration}")
  string(REPLACE "(" "" name "${name}")
  if(NOT name MATCHES "^sotto_(llm|tts)_create(_on_pool)?$" AND NOT name STREQUAL "sotto_asr_create_on_pool")
    list(APPEND SOTTO_API_EXPORTS --export=${name})
  endif()
endforeach()
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/api/sotto.h)

set(SOTTO_WASM_OUTPUT ${CMAKE_BINARY_DIR}/sotto.wasm)
set(SOTTO_WASM_LINK_FLAGS
    --no-entry --import-memory --shared-memory --max-memory=4294967296 --initial-memory=16777216
    -z stack-size=1048576 --no-check-features --export=__wasm_call_ctors --export=__heap_base ${SOTTO_API_EXPORTS})
add_custom_command(
  OUTPUT ${SOTTO_WASM_OUTPUT}
  COMMAND ${SOTTO_WASM_LINKER} ${SOTTO_WASM_LINK_FLAGS} $<TARGET_OBJECTS:sotto_wasm_objects>
          ${SOTTO_WASM_LIBCXX_LIBRARY} -o ${SOTTO_WASM_OUTPUT}
  DEPENDS sotto_wasm_objects $<TARGET_OBJECTS:sotto_wasm_objects>
  COMMAND_EXPAND_LISTS
  COMMENT "Linking sotto.wasm (${SOTTO_WASM_VARIANT})")
add_custom_target(sotto_wasm ALL DEPENDS ${SOTTO_WASM_OUTPUT})
