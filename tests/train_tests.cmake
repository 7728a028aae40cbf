# One function per kind of test, for examples/CMakeLists.txt (where sparsepush-train is a target)
# and tests/CMakeLists.txt. Each adds the test NAME and takes the properties as keywords:
#   LABELS l...  TIMEOUT s  RUN_SERIAL  SKIP_RETURN_CODE c  PASS_REGULAR_EXPRESSION r
# (labels unquoted, one argument each). A list inside one argument ("-DARGS=a;b") stays one.
#
#   sparsepush_test(NAME COMMAND cmd...)                      any command
#   sparsepush_train_run(NAME ARGS a...)                      sparsepush-train ARGS exits 0
#   sparsepush_rejects(NAME EXPECT text|EXPECT_REGEX regex ARGS a... [EXE exe] [EMPTY_LAST])
#       exit code 2 and EXPECT in the output, or output matching EXPECT_REGEX
#       (cmake/expect_exit_2.cmake); EXE (default sparsepush-train) runs ARGS; EMPTY_LAST: then an
#       empty argument
#   sparsepush_train_check(NAME SCRIPT tests/x.cmake WORK_DIR dir [ARGS a...] [DEFINES -DK=V...])
#       a -P script given -DEXE (sparsepush-train), -DWORK_DIR (under this build directory),
#       "-DARGS=a;..." (the run's options) and DEFINES
#   sparsepush_train_mpi_check(NAME SCRIPT tests/mpi/x.cmake WORK_DIR dir ARGS a... [DEFINES ...])
#       the same for a script that launches MPI jobs: -DTRAIN, -DMPIEXEC (with its flags) and
#       -DNP_FLAG instead of -DEXE; labelled mpi and cli, RUN_SERIAL
#   sparsepush_train_script(NAME SCRIPT tests/x.sh [CASE c] WORK_DIR dir [EXTRA a...])
#       bash SCRIPT [CASE] sparsepush-train DIR [EXTRA...]
include_guard(GLOBAL)

# the properties parsed into T_* (a macro: it reads the caller's T_ variables)
macro(_sparsepush_test_properties name)
  if(T_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}")
  endif()
  if(T_TIMEOUT)
    set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT})
  endif()
  if(T_RUN_SERIAL)
    set_tests_properties(${name} PROPERTIES RUN_SERIAL TRUE)
  endif()
  if(DEFINED T_SKIP_RETURN_CODE)
    set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE ${T_SKIP_RETURN_CODE})
  endif()
  if(DEFINED T_PASS_REGULAR_EXPRESSION)
    set_tests_properties(${name} PROPERTIES PASS_REGULAR_EXPRESSION "${T_PASS_REGULAR_EXPRESSION}")
  endif()
endmacro()

function(sparsepush_test name)
  cmake_parse_arguments(PARSE_ARGV 1 T RUN_SERIAL "TIMEOUT;SKIP_RETURN_CODE;PASS_REGULAR_EXPRESSION" "LABELS;COMMAND")
  add_test(NAME ${name} COMMAND ${T_COMMAND})
  _sparsepush_test_properties(${name})
endfunction()

function(sparsepush_train_run name)
  cmake_parse_arguments(PARSE_ARGV 1 T RUN_SERIAL "TIMEOUT;SKIP_RETURN_CODE;PASS_REGULAR_EXPRESSION" "LABELS;ARGS")
  add_test(NAME ${name} COMMAND sparsepush-train ${T_ARGS})
  _sparsepush_test_properties(${name})
endfunction()

function(sparsepush_rejects name)
  cmake_parse_arguments(PARSE_ARGV 1 T "RUN_SERIAL;EMPTY_LAST"
                        "TIMEOUT;SKIP_RETURN_CODE;PASS_REGULAR_EXPRESSION;EXPECT;EXPECT_REGEX;EXE" "LABELS;ARGS")
  if(NOT T_EXE)
    set(T_EXE $<TARGET_FILE:sparsepush-train>)
  endif()
  set(expect "-DEXPECT=${T_EXPECT}")
  if(DEFINED T_EXPECT_REGEX)
    set(expect "-DEXPECT_REGEX=${T_EXPECT_REGEX}")
  endif()
  set(empty_last "")
  if(T_EMPTY_LAST)
    set(empty_last -DEMPTY_LAST=ON)
  endif()
  add_test(NAME ${name}
           COMMAND ${CMAKE_COMMAND} -DEXE=${T_EXE} "-DARGS=${T_ARGS}" "${expect}" ${empty_last}
                   -P ${PROJECT_SOURCE_DIR}/cmake/expect_exit_2.cmake)
  _sparsepush_test_properties(${name})
endfunction()

function(sparsepush_train_check name)
  cmake_parse_arguments(PARSE_ARGV 1 T RUN_SERIAL "TIMEOUT;SKIP_RETURN_CODE;PASS_REGULAR_EXPRESSION;SCRIPT;WORK_DIR"
                        "LABELS;ARGS;DEFINES")
  if(T_ARGS)  # one element: its semicolons escaped
    string(REPLACE ";" "\\;" args "${T_ARGS}")
    list(PREPEND T_DEFINES "-DARGS=${args}")
  endif()
  add_test(NAME ${name}
           COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:sparsepush-train> -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/${T_WORK_DIR}
                   ${T_DEFINES} -P ${PROJECT_SOURCE_DIR}/${T_SCRIPT})
  _sparsepush_test_properties(${name})
endfunction()

function(sparsepush_train_mpi_check name)
  cmake_parse_arguments(PARSE_ARGV 1 T RUN_SERIAL "TIMEOUT;SKIP_RETURN_CODE;PASS_REGULAR_EXPRESSION;SCRIPT;WORK_DIR"
                        "LABELS;ARGS;DEFINES")
  add_test(NAME ${name}
           COMMAND ${CMAKE_COMMAND} -DTRAIN=$<TARGET_FILE:sparsepush-train>
                   "-DMPIEXEC=${MPIEXEC_EXECUTABLE};${SPARSEPUSH_MPIEXEC_FLAGS}" -DNP_FLAG=${MPIEXEC_NUMPROC_FLAG}
                   "-DARGS=${T_ARGS}" ${T_DEFINES} -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/${T_WORK_DIR}
                   -P ${PROJECT_SOURCE_DIR}/${T_SCRIPT})
  set(T_LABELS mpi cli)
  set(T_RUN_SERIAL TRUE)
  _sparsepush_test_properties(${name})
endfunction()

function(sparsepush_train_script name)
  cmake_parse_arguments(PARSE_ARGV 1 T RUN_SERIAL "TIMEOUT;SKIP_RETURN_CODE;PASS_REGULAR_EXPRESSION;SCRIPT;CASE;WORK_DIR"
                        "LABELS;EXTRA")
  add_test(NAME ${name}
           COMMAND bash ${PROJECT_SOURCE_DIR}/${T_SCRIPT} ${T_CASE} $<TARGET_FILE:sparsepush-train>
                   ${CMAKE_CURRENT_BINARY_DIR}/${T_WORK_DIR} ${T_EXTRA})
  _sparsepush_test_properties(${name})
endfunction()

# sparsepush_final_rounds(var alg count): in var, "--final-rounds;count" for SCSP (the algorithm
# with final rounds) and nothing for the others, which refuse a setting they do not use.
function(sparsepush_final_rounds var alg count)
  if(alg STREQUAL "scsp")
    set(${var} --final-rounds ${count} PARENT_SCOPE)
  else()
    set(${var} "" PARENT_SCOPE)
  endif()
endfunction()
