# Compiles SOURCE (which must fail) and checks that the diagnostics contain every line
# "// expect: <text>" of SOURCE, as literal text (no square brackets: CMake lists use them).
# The first expectation (the rule's name or sentence) must stand within the first 5 lines of
# the diagnostics, or within the first N where SOURCE says "// leads by line: N" and why, and
# the whole diagnostic may not exceed 30 lines: a user reads the rule first, and briefly.
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

# Where the first expectation stands, and how long the diagnostics are.
set(lead_limit 5)
file(STRINGS "${SOURCE}" lead_override REGEX "^// leads by line: [0-9]+")
if(lead_override)
  string(REGEX REPLACE "^// leads by line: ([0-9]+).*" "\\1" lead_limit "${lead_override}")
endif()
list(GET expectations 0 lead)
string(REGEX REPLACE "^// expect: " "" lead "${lead}")
string(FIND "${diagnostics}" "${lead}" lead_at)
string(SUBSTRING "${diagnostics}" 0 ${lead_at} before_lead)
string(REGEX MATCHALL "\n" newlines_before "${before_lead}")
list(LENGTH newlines_before lead_line)
math(EXPR lead_line "${lead_line} + 1")
string(REGEX MATCHALL "\n" newlines "${diagnostics}")
list(LENGTH newlines line_count)
if(lead_line GREATER lead_limit)
  message(FATAL_ERROR "the diagnostics of ${SOURCE} show \"${lead}\" on line ${lead_line}, after line "
                      "${lead_limit}:\n${diagnostics}")
endif()
if(line_count GREATER 30)
  message(FATAL_ERROR "the diagnostics of ${SOURCE} run to ${line_count} lines, more than 30:\n${diagnostics}")
endif()
message(STATUS "rejected as expected: ${SOURCE} (first expectation on line ${lead_line}, ${line_count} lines)")
