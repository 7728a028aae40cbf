# sparsepush-train --jitter F: every local step takes U[1, F] times its compute time (a sleep), so
# the summary is the plain run's, bit for bit, in every field that is not a time or a speed, its
# "jitter" is F (null without it), and its time inside rounds is at least MIN_RATIO x the plain
# run's (F = 4: 2.5 x on average in the steps).
# Usage: cmake -DEXE=exe "-DARGS=a;b" -DJITTER=2 -DMIN_RATIO=1.2 -DWORK_DIR=dir -P check_jitter.cmake
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
include(${CMAKE_CURRENT_LIST_DIR}/run_or_fail.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/summary_checks.cmake)
run(${EXE} ${ARGS} --summary ${WORK_DIR}/plain.json)
run(${EXE} ${ARGS} --jitter ${JITTER} --summary ${WORK_DIR}/jitter.json)
file(READ ${WORK_DIR}/plain.json plain)
file(READ ${WORK_DIR}/jitter.json slow)
set(fields avg_test_accuracy averaged_model_test_accuracy param_divergence first_loss loss bytes_sent_total
    comm_ratio rounds messages_sent weight_mass steps_per_node max_staleness policy max_delay)
summary_fields_equal("${plain}" "${slow}" "${fields}" "with --jitter ${JITTER}")
summary_field_null("${plain}" jitter "without --jitter")
string(JSON j GET "${slow}" jitter)
if(NOT j EQUAL JITTER)
  message(FATAL_ERROR "the summary's jitter is ${j}, expected ${JITTER}")
endif()
message(STATUS "--jitter ${JITTER}: the summary equals the plain run's in ${fields}")
summary_slower_at_least("${plain}" "${slow}" ${MIN_RATIO} "with --jitter ${JITTER}")
