# The CUDA kernel layer (include/strata/cuda): the strata::cuda target, and every .cuh
# compiled on its own by nvcc, so a CI machine without a GPU still compiles all GPU code.
# Where NCCL is found, also the nccl backend (include/strata/comm/nccl): strata::nccl, its
# nccl.hpp compiled on its own by nvcc too.
# Included from the top level once check_language(CUDA) has found a compiler.

set(CMAKE_CUDA_ARCHITECTURES ${STRATA_CUDA_ARCHITECTURES})
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)

# CMake 3.25 predates nvcc's C++20 support (nvcc 12): teach it the flag and the feature.
if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION -std=c++20)
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION -std=c++20)
endif()
if(NOT cuda_std_20 IN_LIST CMAKE_CUDA_COMPILE_FEATURES)
  list(APPEND CMAKE_CUDA_COMPILE_FEATURES cuda_std_20)
  set(CMAKE_CUDA20_COMPILE_FEATURES cuda_std_20)
endif()

# GPU tests and the GPU benchmark exit with this code when the machine has no GPU, and
# CTest reports them as skipped (SKIP_RETURN_CODE), not passed.
set(STRATA_GPU_SKIP_CODE 77)

add_library(strata_cuda INTERFACE)
add_library(strata::cuda ALIAS strata_cuda)
set_target_properties(strata_cuda PROPERTIES EXPORT_NAME cuda)
file(GLOB_RECURSE strata_cuda_headers CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/include/strata/cuda/*.cuh")
# The kernel layer includes only the standard library and strata headers that do too
# (config, error, numeric, optim, kernels, sync/compress/low_rank), so it needs neither
# MPI nor Boost nor fmt: strata::cuda stands alone.
target_sources(strata_cuda INTERFACE FILE_SET HEADERS BASE_DIRS include FILES ${strata_cuda_headers})
target_compile_features(strata_cuda INTERFACE cxx_std_20 cuda_std_20)
# std::bit_cast, std::min and friends are constexpr host functions; device code calls them.
target_compile_options(strata_cuda INTERFACE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr>)
target_link_libraries(strata_cuda INTERFACE CUDA::cudart CUDA::cublas)

# --- Where NCCL and cuDNN live ---------------------------------------------------------
# In this order: NCCL_ROOT / CUDNN_ROOT (CMake variables or environment), the nvidia/nccl and
# nvidia/cudnn folders of Python's site-packages (PyPI's nvidia-nccl-cu13 and
# nvidia-cudnn-cu13 wheels: the GPU machine has no other copy), then the toolkit's folders
# and the system's. The wheels ship versioned libraries only (libnccl.so.2, libcudnn.so.9),
# so those names are searched too.
find_program(STRATA_PYTHON NAMES python3 python)
set(strata_python_sites "")
if(STRATA_PYTHON)
  execute_process(COMMAND "${STRATA_PYTHON}" -c
                          "import site; print(';'.join(site.getsitepackages() + [site.getusersitepackages()]))"
                  OUTPUT_VARIABLE strata_python_sites OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
endif()
# strata_gpu_library_roots(<out> <ROOT variable> <wheel folder>): the folders to search first.
function(strata_gpu_library_roots out root wheel)
  set(roots ${${root}} $ENV{${root}})
  foreach(site IN LISTS strata_python_sites)
    list(APPEND roots "${site}/nvidia/${wheel}")
  endforeach()
  set(${out} ${roots} PARENT_SCOPE)
endfunction()
strata_gpu_library_roots(strata_nccl_roots NCCL_ROOT nccl)
strata_gpu_library_roots(strata_cudnn_roots CUDNN_ROOT cudnn)

# --- NCCL (optional: the nccl backend, include/strata/comm/nccl) ------------------------
find_path(STRATA_NCCL_INCLUDE_DIR nccl.h HINTS ${strata_nccl_roots} ${CUDAToolkit_INCLUDE_DIRS}
          PATH_SUFFIXES include x86_64-linux-gnu)
find_library(STRATA_NCCL_LIBRARY NAMES nccl libnccl.so.2 NAMES_PER_DIR HINTS ${strata_nccl_roots} ${CUDAToolkit_LIBRARY_DIR}
             PATH_SUFFIXES lib lib64 x86_64-linux-gnu)
set(strata_nvcc_checked_headers ${strata_cuda_headers})
if(STRATA_NCCL_INCLUDE_DIR AND STRATA_NCCL_LIBRARY)
  # nccl.hpp needs only CUDA and NCCL; mpi_bootstrap.hpp adds MPI and fmt (strata::strata),
  # so its consumers link both targets.
  add_library(strata_nccl INTERFACE)
  add_library(strata::nccl ALIAS strata_nccl)
  set_target_properties(strata_nccl PROPERTIES EXPORT_NAME nccl)
  file(GLOB strata_nccl_headers CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/include/strata/comm/nccl/*.hpp")
  target_sources(strata_nccl INTERFACE FILE_SET HEADERS BASE_DIRS include FILES ${strata_nccl_headers})
  target_include_directories(strata_nccl INTERFACE $<BUILD_INTERFACE:${STRATA_NCCL_INCLUDE_DIR}>)
  target_link_libraries(strata_nccl INTERFACE strata::cuda ${STRATA_NCCL_LIBRARY})
  # The nccl executor (data parallelism on device memory) launches strata's kernels: a .cuh
  # outside cuda/, so it is named here.
  target_sources(strata_nccl INTERFACE FILE_SET HEADERS BASE_DIRS include FILES
                 "${PROJECT_SOURCE_DIR}/include/strata/exec/nccl_executor.cuh")
  list(APPEND strata_nvcc_checked_headers "${PROJECT_SOURCE_DIR}/include/strata/comm/nccl/nccl.hpp"
                                          "${PROJECT_SOURCE_DIR}/include/strata/exec/device_executor.hpp"
                                          "${PROJECT_SOURCE_DIR}/include/strata/exec/nccl_executor.cuh")
elseif(STRATA_REQUIRE_GPU_PARTS)
  message(FATAL_ERROR "strata: NCCL not found (nccl.h: ${STRATA_NCCL_INCLUDE_DIR}, libnccl: ${STRATA_NCCL_LIBRARY}); "
                      "install the nvidia-nccl-cu13 wheel or set NCCL_ROOT")
else()
  message(STATUS "strata: NCCL not found (nccl.h: ${STRATA_NCCL_INCLUDE_DIR}, libnccl: ${STRATA_NCCL_LIBRARY}); "
                 "the nccl backend and its tests are skipped")
endif()

strata_header_check(strata_cuda_headers_self_contained cu ${strata_nvcc_checked_headers})
target_link_libraries(strata_cuda_headers_self_contained PRIVATE strata::cuda)
if(TARGET strata_nccl)
  target_link_libraries(strata_cuda_headers_self_contained PRIVATE strata::nccl)
endif()

find_path(STRATA_CUDNN_INCLUDE_DIR cudnn.h HINTS ${strata_cudnn_roots} ${CUDAToolkit_INCLUDE_DIRS}
          PATH_SUFFIXES include x86_64-linux-gnu)
find_library(STRATA_CUDNN_LIBRARY NAMES cudnn libcudnn.so.9 NAMES_PER_DIR HINTS ${strata_cudnn_roots} ${CUDAToolkit_LIBRARY_DIR}
             PATH_SUFFIXES lib lib64 x86_64-linux-gnu)
message(STATUS "strata: CUDA ${CUDAToolkit_VERSION} (${CMAKE_CUDA_COMPILER}) for architectures ${CMAKE_CUDA_ARCHITECTURES}; "
               "NCCL: ${STRATA_NCCL_INCLUDE_DIR} ${STRATA_NCCL_LIBRARY}; cuDNN: ${STRATA_CUDNN_INCLUDE_DIR} ${STRATA_CUDNN_LIBRARY}")

include(${CMAKE_CURRENT_LIST_DIR}/carried.cmake)
