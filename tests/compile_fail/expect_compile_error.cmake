# Compiles SOURCE (which must fail) and checks that the diagnostics contain every line
# "// expect: <text>" of SOURCE, as literal text (no square brackets: CMake lists use them).
# Arguments: -DCXX=<compiler> -DSOURCE=<file> -DINCLUDES=<dir;dir> [-DLANG_FLAGS=<flags>]
file(STRINGS "${SOURCE}" expectations REGEX "^// expect: ")
if(NOT expectations)
  message(FATAL_ERROR "${SOURCE} has no '// expect:' line")
endif()
set(include_flags)
foreach(dir IN LISTS INCLUDES)
  list(APPEND include_flags "-I${dir}")
endforeach()
execute_process(COMMAND "${CXX}" -std=c++20 -fsyntax-only ${include_flags} "${SOURCE}"
                RESULT_VARIABLE status ERROR_VARIABLE diagnostics OUTPUT_VARIABLE output)
if(status EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled, but it is an invalid strategy and must be rejected")
endif()
foreach(line IN LISTS expectations)
  string(REGEX REPLACE "^// expect: " "" wanted "${line}")
  string(FIND "${diagnostics}" "${wanted}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the diagnostics of ${SOURCE} do not contain \"${wanted}\":\n${diagnostics}")
  endif()
endforeach()
message(STATUS "rejected as expected: ${SOURCE}")
