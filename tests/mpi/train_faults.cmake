# sparsepush-train --transport mpi with one rank stopped (SIGSTOP) mid-run: the others give up
# after --mpi-timeout wherever they wait (an envelope, the gather of the losses, an evaluation's
# sums), name the timeout, and the job ends non-zero instead of hanging. Included from
# examples/CMakeLists.txt, where sparsepush-train is a target and the MPI launcher is known.
foreach(stopped IN ITEMS 0 1)
  add_test(NAME mpi_train_sigstop_rank${stopped}
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/stop_rank.sh ${stopped} $<TARGET_FILE:sparsepush-train>
                   ${CMAKE_CURRENT_BINARY_DIR}/sigstop_rank${stopped} ${MPIEXEC_EXECUTABLE} ${SPARSEPUSH_MPIEXEC_FLAGS})
  set_tests_properties(mpi_train_sigstop_rank${stopped} PROPERTIES LABELS "mpi;cli" TIMEOUT 150 RUN_SERIAL TRUE
                       PASS_REGULAR_EXPRESSION "naming the timeout: ok")
endforeach()
