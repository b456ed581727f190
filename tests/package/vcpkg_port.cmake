# The vcpkg overlay port (ports/strata), run without the vcpkg tool, which cannot be fetched
# here. This script defines the vcpkg helpers the portfile calls, each doing what vcpkg's does
# for a release-only x64-linux build and refusing what vcpkg's would refuse (unknown arguments,
# unused configure options), runs the portfile into a package folder, checks the layout vcpkg's
# post-build checks ask for, and builds and runs a consumer (find_package(strata CONFIG
# REQUIRED)) against that folder, as a project using vcpkg's toolchain file would.
# Arguments: SOURCE_DIR (the repository), WORK_DIR, CXX, CONSUMER_DIR.
cmake_minimum_required(VERSION 3.25)  # a -P script: IN_LIST and other current behaviour
include(${CMAKE_CURRENT_LIST_DIR}/run.cmake)
file(REMOVE_RECURSE "${WORK_DIR}")
set(PORT strata)
set(port_dir "${SOURCE_DIR}/ports/${PORT}")
set(CURRENT_PACKAGES_DIR "${WORK_DIR}/packages/${PORT}_x64-linux")
set(build_dir "${WORK_DIR}/buildtrees/${PORT}/x64-linux-rel")

# --- the manifest: JSON, the project's own version, the dependencies the package finds ---
file(READ "${port_dir}/vcpkg.json" manifest)
string(JSON name GET "${manifest}" name)
string(JSON version GET "${manifest}" version)
file(READ "${SOURCE_DIR}/CMakeLists.txt" project_lists)
string(REGEX MATCH "project\\(strata VERSION ([0-9.]+)" _ "${project_lists}")
if(NOT name STREQUAL PORT OR NOT version STREQUAL CMAKE_MATCH_1)
  message(FATAL_ERROR "vcpkg.json names ${name} ${version}; the project is ${PORT} ${CMAKE_MATCH_1}")
endif()
string(JSON count LENGTH "${manifest}" dependencies)
math(EXPR last "${count} - 1")
set(dependencies "")
foreach(i RANGE ${last})
  string(JSON type TYPE "${manifest}" dependencies ${i})
  if(type STREQUAL "OBJECT")
    string(JSON dependency GET "${manifest}" dependencies ${i} name)
  else()
    string(JSON dependency GET "${manifest}" dependencies ${i})
  endif()
  list(APPEND dependencies ${dependency})
endforeach()
foreach(needed boost-hana fmt mpi nlohmann-json zlib vcpkg-cmake vcpkg-cmake-config)
  if(NOT needed IN_LIST dependencies)
    message(FATAL_ERROR "vcpkg.json does not depend on ${needed} (it lists ${dependencies})")
  endif()
endforeach()

# --- vcpkg's helpers, as they behave for this port ---------------------------------------
function(vcpkg_cmake_configure)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "SOURCE_PATH" "OPTIONS;OPTIONS_RELEASE;MAYBE_UNUSED_VARIABLES")
  if(arg_UNPARSED_ARGUMENTS OR NOT arg_SOURCE_PATH)
    message(FATAL_ERROR "vcpkg_cmake_configure: unexpected arguments ${arg_UNPARSED_ARGUMENTS}, or no SOURCE_PATH")
  endif()
  if(NOT VCPKG_BUILD_TYPE STREQUAL "release")
    message(FATAL_ERROR "a header-only port configures release only: set(VCPKG_BUILD_TYPE release)")
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} -S "${arg_SOURCE_PATH}" -B "${build_dir}"
                          -DCMAKE_BUILD_TYPE=Release "-DCMAKE_INSTALL_PREFIX=${CURRENT_PACKAGES_DIR}"
                          "-DCMAKE_CXX_COMPILER=${CXX}" ${arg_OPTIONS} ${arg_OPTIONS_RELEASE}
                  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "configuring the port failed:\n${out}")
  endif()
  # vcpkg warns about options the project never reads: a misspelled option would go unnoticed.
  string(REGEX MATCH "Manually-specified variables were not used by the project:[^\n]*\n\n([^\n]+\n)+" unused "${out}")
  foreach(variable IN LISTS arg_MAYBE_UNUSED_VARIABLES)
    string(REGEX REPLACE "\n *${variable}\n" "\n" unused "${unused}")
  endforeach()
  if(unused MATCHES "\n +[A-Z]")
    message(FATAL_ERROR "the port passes options the project does not use:\n${unused}")
  endif()
endfunction()

function(vcpkg_cmake_install)
  if(ARGN)
    message(FATAL_ERROR "vcpkg_cmake_install: this port passes no arguments, got ${ARGN}")
  endif()
  run(${CMAKE_COMMAND} --build "${build_dir}")
  run(${CMAKE_COMMAND} --install "${build_dir}")
endfunction()

# vcpkg moves the package files from CONFIG_PATH to share/<port> and rewrites the paths in them;
# a port that installs them there already leaves it nothing to move.
function(vcpkg_cmake_config_fixup)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "CONFIG_PATH;PACKAGE_NAME" "")
  if(NOT arg_CONFIG_PATH STREQUAL "share/${PORT}")
    message(FATAL_ERROR "this check expects the port to install its CMake files in share/${PORT}, not ${arg_CONFIG_PATH}")
  endif()
  if(NOT EXISTS "${CURRENT_PACKAGES_DIR}/share/${PORT}/strataConfig.cmake")
    message(FATAL_ERROR "no strataConfig.cmake in ${CURRENT_PACKAGES_DIR}/share/${PORT}")
  endif()
endfunction()

function(vcpkg_fixup_pkgconfig)
  file(GLOB pc_files "${CURRENT_PACKAGES_DIR}/lib/pkgconfig/*.pc" "${CURRENT_PACKAGES_DIR}/share/pkgconfig/*.pc")
  if(NOT pc_files)
    message(FATAL_ERROR "vcpkg_fixup_pkgconfig: no .pc file was installed")
  endif()
endfunction()

function(vcpkg_install_copyright)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "" "FILE_LIST")
  set(text "")
  foreach(file IN LISTS arg_FILE_LIST)
    file(READ "${file}" content)
    string(APPEND text "${content}")
  endforeach()
  file(WRITE "${CURRENT_PACKAGES_DIR}/share/${PORT}/copyright" "${text}")
endfunction()

include("${port_dir}/portfile.cmake")

# --- the layout vcpkg's post-build checks want ---------------------------------------------
foreach(wanted include/strata/strata.hpp share/${PORT}/strataConfig.cmake share/${PORT}/copyright share/${PORT}/usage
               tools/${PORT}/strata-launch)
  if(NOT EXISTS "${CURRENT_PACKAGES_DIR}/${wanted}")
    message(FATAL_ERROR "the port did not install ${wanted}")
  endif()
endforeach()
foreach(unwanted bin debug lib/cmake)
  if(EXISTS "${CURRENT_PACKAGES_DIR}/${unwanted}")
    message(FATAL_ERROR "the port left ${unwanted}/, which vcpkg refuses in a header-only, static x64-linux package")
  endif()
endforeach()
file(GLOB_RECURSE text_files "${CURRENT_PACKAGES_DIR}/share/*" "${CURRENT_PACKAGES_DIR}/lib/pkgconfig/*")
foreach(file IN LISTS text_files)
  file(READ "${file}" content)
  string(FIND "${content}" "${WORK_DIR}" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "${file} holds an absolute path into the build (${WORK_DIR}): the package would not relocate")
  endif()
endforeach()

# --- a consumer finds it ------------------------------------------------------------------
run(${CMAKE_COMMAND} -S "${CONSUMER_DIR}" -B "${WORK_DIR}/consumer" "-DCMAKE_PREFIX_PATH=${CURRENT_PACKAGES_DIR}"
    "-DCMAKE_CXX_COMPILER=${CXX}")  # no build type: unoptimized, 0.75x the compile time
run(${CMAKE_COMMAND} --build "${WORK_DIR}/consumer")
run("${WORK_DIR}/consumer/consumer")
