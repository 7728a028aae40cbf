# sparsepush-train's waiting policies in one process, as docs/cli.md states them: the summary's
# "policy" and "max_delay" (--max-delay defaults to N for --staleness N, 4 for inf, none (null) in
# lockstep and with --overlap; an explicit value is kept, 0 is none), every node's steps equal (one
# process runs every node every round), and the largest staleness mixed (0 in lockstep, 1 with
# --overlap, in [1, max_delay] with delays); evaluations sum in node order (eval_reduce ordered).
# Usage: cmake -DEXE=exe "-DARGS=a;b" -DWORK_DIR=dir -P check_policy_defaults.cmake
# (ARGS: a short --algorithm sp run whose evaluations leave rounds between their drains.)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
include(${CMAKE_CURRENT_LIST_DIR}/run_or_fail.cmake)
# name | options (comma-separated; none) | policy | max_delay (null: none) | max_staleness (a number, or "delay": in [1, max_delay])
set(cases "default|none|lockstep|null|0"
          "staleness_0|--staleness,0|lockstep|null|0"
          "overlap|--overlap|overlap|null|1"
          "staleness_1|--staleness,1|staleness:1|1|delay"
          "staleness_3|--staleness,3|staleness:3|3|delay"
          "inf|--staleness,inf|asynchronous|4|delay"
          "inf_max_delay_7|--staleness,inf,--max-delay,7|asynchronous|7|delay"
          "staleness_2_max_delay_1|--staleness,2,--max-delay,1|staleness:2|1|delay"
          "staleness_2_max_delay_0|--staleness,2,--max-delay,0|staleness:2|null|0")
foreach(c IN LISTS cases)
  string(REPLACE "|" ";" parts "${c}")
  list(GET parts 0 name)
  list(GET parts 1 opts)
  list(GET parts 2 want_policy)
  list(GET parts 3 want_delay)
  list(GET parts 4 want_stale)
  string(REPLACE "," ";" opts "${opts}")
  if(opts STREQUAL "none")
    set(opts "")
  endif()
  set(json ${WORK_DIR}/${name}.json)
  execute_process(COMMAND ${EXE} ${ARGS} ${opts} --summary ${json}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT ${RUN_TIMEOUT})
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${EXE} ${ARGS} ${opts}\n${out}\n${err}")
  endif()
  file(READ ${json} s)
  string(JSON policy GET "${s}" policy)
  if(NOT policy STREQUAL want_policy)
    message(FATAL_ERROR "${opts}: the summary's policy is ${policy}, expected ${want_policy}")
  endif()
  string(JSON type TYPE "${s}" max_delay)
  if(want_delay STREQUAL "null")
    if(NOT type STREQUAL "NULL")
      string(JSON v GET "${s}" max_delay)
      message(FATAL_ERROR "${opts}: the summary's max_delay is ${v}, expected null (no delay model)")
    endif()
  else()
    string(JSON v GET "${s}" max_delay)
    if(NOT type STREQUAL "NUMBER" OR NOT v EQUAL want_delay)
      message(FATAL_ERROR "${opts}: the summary's max_delay is ${v}, expected ${want_delay}")
    endif()
    # the header line names the delay model
    string(FIND "${out}" "policy ${want_policy} (in-process delays of 0 to ${want_delay} rounds)" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "${opts}: the header line does not name the delays of 0 to ${want_delay} rounds:\n${out}")
    endif()
  endif()
  # evaluations sum in node order unless --eval-reduce says otherwise (docs/cli.md: the default)
  string(JSON reduce GET "${s}" eval_reduce)
  if(NOT reduce STREQUAL "ordered")
    message(FATAL_ERROR "${opts}: the summary's eval_reduce is ${reduce}, expected ordered (the default)")
  endif()
  # every node took every round's step
  string(JSON lo GET "${s}" steps_per_node min)
  string(JSON hi GET "${s}" steps_per_node max)
  string(JSON rounds GET "${s}" rounds)
  if(NOT lo EQUAL rounds OR NOT hi EQUAL rounds)
    message(FATAL_ERROR "${opts}: steps_per_node from ${lo} to ${hi}, expected ${rounds} at every node")
  endif()
  string(JSON stale GET "${s}" max_staleness)
  if(want_stale STREQUAL "delay")
    if(stale LESS 1 OR stale GREATER want_delay)
      message(FATAL_ERROR "${opts}: max_staleness is ${stale}, expected 1 to ${want_delay}")
    endif()
  elseif(NOT stale EQUAL want_stale)
    message(FATAL_ERROR "${opts}: max_staleness is ${stale}, expected ${want_stale}")
  endif()
  message(STATUS "${name} (${opts}): policy ${policy}, max_delay ${want_delay}, max_staleness ${stale}, ${rounds} steps a node")
endforeach()
