# Toolchain for sotto's WebAssembly build: Debian's clang-19 + lld-19 targeting plain wasm32 with no libc.
# Headers come from libc++-19-dev-wasm32 (libc++ for wasm32-wasi, header use only, plus its static libc++.a for
# a few out-of-line pieces); src/wasm/ supplies malloc, math and the stdio stubs that libc++ needs.
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR wasm32)

set(CMAKE_C_COMPILER clang-19)
set(CMAKE_CXX_COMPILER clang++-19)
set(CMAKE_C_COMPILER_TARGET wasm32-wasi)
set(CMAKE_CXX_COMPILER_TARGET wasm32-wasi)

# There is no libc to link test executables against: check the compilers by building a static library.
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)

set(SOTTO_WASM_LIBCXX_INCLUDE /usr/lib/llvm-19/include/wasm32-wasi/c++/v1)
set(SOTTO_WASM_SYSROOT_INCLUDE /usr/include/wasm32-wasi)
set(SOTTO_WASM_LIBCXX_LIBRARY /usr/lib/llvm-19/lib/wasm32-wasi/libc++.a)
set(SOTTO_WASM_LINKER wasm-ld-19)

set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
