# The compiled part is whole: every definitions file (include/strata/**/impl/NAME.ipp) is
# included by strata/impl/src.hpp, which STRATA_SEPARATE_COMPILATION programs compile once,
# and by its header (../NAME.hpp) when strata is header-only. A file missing from either
# would surface only as a link error in a program that happens to use it.
# cmake -DINCLUDE_DIR=<repo>/include -P compiled_part.cmake
file(GLOB_RECURSE definitions RELATIVE "${INCLUDE_DIR}" "${INCLUDE_DIR}/strata/*.ipp")
file(READ "${INCLUDE_DIR}/strata/impl/src.hpp" src)
set(problems "")
foreach(ipp IN LISTS definitions)
  if(NOT src MATCHES "#include \"${ipp}\"")
    string(APPEND problems "  strata/impl/src.hpp does not include ${ipp}\n")
  endif()
  string(REGEX REPLACE "/impl/([^/]+)\\.ipp$" "/\\1.hpp" header "${ipp}")
  if(NOT EXISTS "${INCLUDE_DIR}/${header}")
    string(APPEND problems "  ${ipp} has no header ${header}\n")
    continue()
  endif()
  file(READ "${INCLUDE_DIR}/${header}" text)
  if(NOT text MATCHES "#if defined\\(STRATA_HEADER_ONLY\\)\n#include \"${ipp}\"\n#endif\n$")
    string(APPEND problems "  ${header} does not end by including ${ipp} when header-only\n")
  endif()
endforeach()
list(LENGTH definitions count)
if(problems)
  message(FATAL_ERROR "the compiled part is not whole:\n${problems}")
endif()
message(STATUS "compiled part: ${count} definitions files, each in src.hpp and behind its header")
