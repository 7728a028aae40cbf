# sparsepush-train with --threads 1 and with more threads writes the same summary, bit for bit, in
# every field that is not a time or a speed (node-parallel rounds and evaluation do not change the
# arithmetic). Usage: cmake -DEXE=exe "-DARGS=a;b" -DWORK_DIR=dir ["-DTHREADS=2;3"] -P check_threads_bits.cmake
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(RUN_TIMEOUT 600)
include(${CMAKE_CURRENT_LIST_DIR}/run_or_fail.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/summary_checks.cmake)
if(NOT DEFINED THREADS)
  set(THREADS 2 3)
endif()
run(${EXE} ${ARGS} --threads 1 --summary ${WORK_DIR}/t1.json)
file(READ ${WORK_DIR}/t1.json ref)
set(fields avg_test_accuracy averaged_model_test_accuracy param_divergence bytes_sent_total comm_ratio
    rounds messages_sent weight_mass)
foreach(t IN LISTS THREADS)
  run(${EXE} ${ARGS} --threads ${t} --summary ${WORK_DIR}/t${t}.json)
  file(READ ${WORK_DIR}/t${t}.json got)
  summary_fields_equal("${ref}" "${got}" "${fields}" "--threads ${t} (the reference: --threads 1)")
  message(STATUS "--threads ${t}: the summary equals --threads 1 in: ${fields}")
endforeach()
