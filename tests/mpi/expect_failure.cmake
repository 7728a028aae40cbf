# Run COMMAND (a list), which must fail (exit code != 0) and print something matching EXPECT:
# a fault must end the job with a clear error, not hang and not pass silently.
# Usage: cmake "-DCOMMAND=a;b;c" "-DEXPECT=regex" -P expect_failure.cmake
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 100)
message("${out}${err}")
if(rc EQUAL 0)
  message(FATAL_ERROR "expected a failure, the run exited 0")
endif()
if(NOT "${out}${err}" MATCHES "${EXPECT}")
  message(FATAL_ERROR "the output does not match '${EXPECT}'")
endif()
message("failed as expected (exit ${rc})")
