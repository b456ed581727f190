# run(<command> [args...]): runs a command from a CMake script, failing the script with the
# command line and its exit status when it does not succeed.
function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "failed (${status}): ${ARGV}")
  endif()
endfunction()
