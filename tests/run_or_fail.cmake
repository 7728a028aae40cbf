# run(COMMAND...): run a command in a -P script; a non-zero exit fails the script with the command
# and its output. RUN_TIMEOUT (seconds, default 300) bounds it.
if(NOT DEFINED RUN_TIMEOUT)
  set(RUN_TIMEOUT 300)
endif()
function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT ${RUN_TIMEOUT})
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGV}\n${out}\n${err}")
  endif()
endfunction()
