# sparsepush-train --transport mpi under mpirun with R ranks (NPS, default 1, 2, 3 and 4) writes
# the same summary as the in-process run, bit for bit, in every field that is not a time or a speed.
# Usage: cmake -DTRAIN=exe "-DMPIEXEC=mpiexec;flags" -DNP_FLAG=-n "-DARGS=a;b" -DWORK_DIR=dir
#              ["-DNPS=2;3"] ["-DEXTRA_FIELDS=f;g"] ["-DFIELDS=f;g"] ["-DEXPECT=field=value;..."]
#              ["-DMPI_ARGS=a;b"] ["-DMPI_EXPECT=field=value;..."] -P train_bits.cmake
# FIELDS: the fields that must be equal, in place of the default list (every metric and count).
# EXTRA_FIELDS: more summary fields that must be equal (e.g. steps_per_node, max_staleness);
# EXPECT: values the in-process summary must have (e.g. max_staleness=1: the policy really delayed).
# MPI_ARGS: options of the MPI runs only (--eval-reduce, which one process refuses); MPI_EXPECT:
# values each MPI summary must have.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
include(${CMAKE_CURRENT_LIST_DIR}/../run_or_fail.cmake)
run(${TRAIN} ${ARGS} --summary ${WORK_DIR}/inprocess.json)
file(READ ${WORK_DIR}/inprocess.json ref)
if(DEFINED FIELDS)  # the fields that must be equal, in place of the default list
  set(fields ${FIELDS} ${EXTRA_FIELDS})
else()
  set(fields avg_test_accuracy averaged_model_test_accuracy param_divergence first_loss loss bytes_sent_total comm_ratio
      rounds messages_dropped weight_mass ${EXTRA_FIELDS})
endif()
# each field=value of `expected` holds in the JSON `summary` (of the run `what`)
function(expect_values expected summary what)
  foreach(e IN LISTS expected)
    if(NOT e MATCHES "^([a-z_]+)=(.*)$")
      message(FATAL_ERROR "expected value ${e} is not field=value")
    endif()
    set(want "${CMAKE_MATCH_2}")
    string(JSON v GET "${summary}" ${CMAKE_MATCH_1})
    if(NOT v STREQUAL want)
      message(FATAL_ERROR "${what} has ${CMAKE_MATCH_1} ${v}, expected ${want}")
    endif()
  endforeach()
endfunction()
expect_values("${EXPECT}" "${ref}" "the in-process run")
if(NOT DEFINED NPS)
  set(NPS 1 2 3 4)
endif()
foreach(np IN LISTS NPS)
  run(${MPIEXEC} ${NP_FLAG} ${np} ${TRAIN} ${ARGS} ${MPI_ARGS} --transport mpi --summary ${WORK_DIR}/mpi${np}.json)
  file(READ ${WORK_DIR}/mpi${np}.json got)
  expect_values("${MPI_EXPECT}" "${got}" "the run on ${np} ranks")
  foreach(f IN LISTS fields)
    string(JSON a GET "${ref}" ${f})
    string(JSON b GET "${got}" ${f})
    if(NOT a STREQUAL b)
      message(FATAL_ERROR "${np} ranks: ${f} is ${b}, the in-process run has ${a}")
    endif()
  endforeach()
  string(JSON ranks GET "${got}" ranks)
  message("${np} ranks: ${fields} equal to the in-process run (ranks in the summary: ${ranks})")
endforeach()
