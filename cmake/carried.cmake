# What the GPU programs need beyond CUDA, NCCL and cuDNN (the CNN example: CLI11 and zlib;
# the nccl executor's checkpoint test: zlib), from the system, or from STRATA_DEPS_DIR
# (default .deps, made by scripts/gpu_deps.sh for a bare GPU machine without -dev packages:
# CLI11's headers and zlib's; zlib's library is the system's libz.so.1).
set(STRATA_DEPS_DIR "${PROJECT_SOURCE_DIR}/.deps" CACHE PATH "header-only dependencies carried to a bare GPU machine")
find_package(CLI11 CONFIG QUIET)
if(NOT TARGET CLI11::CLI11 AND EXISTS "${STRATA_DEPS_DIR}/include/CLI/CLI.hpp")
  add_library(CLI11::CLI11 INTERFACE IMPORTED)
  target_include_directories(CLI11::CLI11 INTERFACE "${STRATA_DEPS_DIR}/include")
endif()
find_package(ZLIB QUIET)
if(NOT TARGET ZLIB::ZLIB AND EXISTS "${STRATA_DEPS_DIR}/include/zlib.h")
  find_library(STRATA_ZLIB_LIBRARY NAMES z libz.so.1 NAMES_PER_DIR PATH_SUFFIXES x86_64-linux-gnu)
  if(STRATA_ZLIB_LIBRARY)
    add_library(ZLIB::ZLIB INTERFACE IMPORTED)
    target_include_directories(ZLIB::ZLIB INTERFACE "${STRATA_DEPS_DIR}/include")
    target_link_libraries(ZLIB::ZLIB INTERFACE "${STRATA_ZLIB_LIBRARY}")
  endif()
endif()
