# `conan create` works offline: exports conanfile.py, packages strata, then builds
# test_package/ (the quickstart, found with find_package(strata CONFIG REQUIRED)) and runs it on
# 2 ranks, against Debian's Boost, fmt, OpenMPI and zlib ([platform_requires] in
# conan/profiles/debian). Conan runs in a scratch CONAN_HOME, so the user's Conan home and cache
# are left alone, and with --no-remote, so nothing is fetched. Nothing is written to the source
# tree: test_package builds under WORK_DIR too, and no CMakeUserPresets.json is written.
# Arguments: CONAN (the conan 2 executable), SOURCE_DIR (the repository), WORK_DIR.
file(REMOVE_RECURSE "${WORK_DIR}")
include(${CMAKE_CURRENT_LIST_DIR}/run.cmake)

if(NOT CONAN)
  message(STATUS "conan_create: skipped: no conan command (scripts/install_deps.sh installs Conan 2 from PyPI)")
  return()
endif()
set(ENV{CONAN_HOME} "${WORK_DIR}/conan_home")
execute_process(COMMAND "${CONAN}" --version OUTPUT_VARIABLE version OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT version MATCHES "^Conan version 2\\.")  # the test's SKIP_REGULAR_EXPRESSION matches this
  message(STATUS "conan_create: skipped: ${CONAN} is not Conan 2 (it says: ${version})")
  return()
endif()
run("${CONAN}" create "${SOURCE_DIR}" --profile:all "${SOURCE_DIR}/conan/profiles/debian"
    --build=missing --no-remote
    -c "tools.cmake.cmake_layout:test_folder=${WORK_DIR}/test_package"
    -c "tools.cmake.cmaketoolchain:user_presets=")
