# sparsepush-train with hostile --plot and --log paths (a shell command in the plot name, gnuplot
# code in the log name) must create no file but the ones it names. Usage:
# cmake -DEXE=sparsepush-train -DWORK_DIR=dir -P check_no_injection.cmake
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(short --nodes 2 --model mlp --algorithm sp --epochs 0.005 --eval-samples 50)
foreach(case IN ITEMS shell gnuplot)
  if(case STREQUAL "shell")
    set(log plain.csv)
    set(plot "a';touch pwned;'.png")
  else()
    set(log "l1.csv' using 1:5 ; system('touch pwned_gp') ; plot 'l1.csv")
    set(plot plain.png)
  endif()
  # quoted: a path with ';' stays one argument
  execute_process(COMMAND ${EXE} ${short} --log "${log}" --plot "${plot}" WORKING_DIRECTORY ${WORK_DIR}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 300)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${case}: the run failed (${rc}):\n${out}\n${err}")
  endif()
  file(GLOB pwned ${WORK_DIR}/pwned*)
  if(pwned)
    message(FATAL_ERROR "${case}: a path ran a command: ${pwned}")
  endif()
  message("${case}: ${out}")
endforeach()
# the hostile names are ordinary files: the plot and the log were written under them
if(NOT EXISTS "${WORK_DIR}/a';touch pwned;'.png" OR NOT EXISTS "${WORK_DIR}/l1.csv' using 1:5 ; system('touch pwned_gp') ; plot 'l1.csv")
  message(FATAL_ERROR "the plot or log under its hostile name is missing")
endif()
