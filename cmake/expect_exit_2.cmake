# Run EXE with ARGS; pass only if it exits with code 2 and its output (stdout and stderr) contains
# EXPECT, or matches the regular expression EXPECT_REGEX.
# Usage: cmake -DEXE=exe "-DARGS=a;b" "-DEXPECT=text" [-DEXPECT_REGEX=regex] [-DEMPTY_LAST=ON] -P expect_exit_2.cmake
# EMPTY_LAST: one more argument after ARGS, the empty string (a list cannot hold it), as an unset
# $DIR gives.
list(JOIN ARGS " " shown)
set(empty_last "")
if(EMPTY_LAST)
  execute_process(COMMAND ${EXE} ${ARGS} "" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(empty_last " ''")
else()
  execute_process(COMMAND ${EXE} ${ARGS} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
endif()
if(NOT rc EQUAL 2)
  message(FATAL_ERROR "expected exit code 2, got ${rc} from: ${EXE} ${shown}${empty_last}\nstdout: ${out}\nstderr: ${err}")
endif()
if(DEFINED EXPECT_REGEX)
  if(NOT "${out}${err}" MATCHES "${EXPECT_REGEX}")
    message(FATAL_ERROR "output does not match '${EXPECT_REGEX}':\n${out}${err}")
  endif()
else()
  string(FIND "${out}${err}" "${EXPECT}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "output does not mention '${EXPECT}':\n${out}${err}")
  endif()
endif()
message(STATUS "exit code 2 with '${EXPECT}${EXPECT_REGEX}' from: ${EXE} ${shown}${empty_last}")
