# Build and run the consumer project against sparsepush, either installed (MODE=package: install
# the build tree's package into a temporary prefix, then find_package) or as a subdirectory.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGV}")
  endif()
endfunction()
if(MODE STREQUAL "package")
  run(${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/lib -G ${GENERATOR}
      -DSPARSEPUSH_BUILD_TESTS=OFF -DSPARSEPUSH_BUILD_BENCH=OFF -DSPARSEPUSH_BUILD_EXAMPLES=OFF
      -DSPARSEPUSH_INSTALL=ON)
  run(${CMAKE_COMMAND} --install ${WORK_DIR}/lib --prefix ${WORK_DIR}/prefix)
  run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/consumer -B ${WORK_DIR}/build -G ${GENERATOR}
      -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCONSUMER_MODE=package)
else()
  run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/consumer -B ${WORK_DIR}/build -G ${GENERATOR}
      -DCONSUMER_MODE=subdirectory -DSPARSEPUSH_SOURCE_DIR=${SOURCE_DIR})
endif()
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run(${WORK_DIR}/build/consumer)
run(${WORK_DIR}/build/scsp_user)
