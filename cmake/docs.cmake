# The API reference: `cmake --build <build> --target docs` runs Doxygen over include/sparsepush
# (docs/Doxyfile.in) and writes <build>/docs/api/html/index.html. The target is not part of ALL.
# With SPARSEPUSH_BUILD_TESTS, the test api_reference_undocumented_count fails when more public
# names are undocumented than docs/api/undocumented-baseline.txt allows.
# Defined only when sparsepush is the top-level project: a project that adds it with
# add_subdirectory keeps the target name `docs` for itself.
if(NOT SPARSEPUSH_TOP_LEVEL)
  return()
endif()

find_package(Doxygen QUIET)
if(NOT DOXYGEN_FOUND)
  message(STATUS "Doxygen not found (Debian package doxygen): the docs target only says so, and the test "
                 "api_reference_undocumented_count is not defined")
  add_custom_target(docs
    COMMAND ${CMAKE_COMMAND} -E echo "The docs target needs Doxygen (Debian package doxygen), which was not found; install it and configure again."
    COMMAND ${CMAKE_COMMAND} -E false
    VERBATIM)
  return()
endif()

set(SPARSEPUSH_DOCS_OUTPUT_DIR ${CMAKE_CURRENT_BINARY_DIR}/docs/api)
set(SPARSEPUSH_DOCS_WARN_LOG ${CMAKE_CURRENT_BINARY_DIR}/docs/doxygen-warnings.log)
set(SPARSEPUSH_DOXYFILE ${CMAKE_CURRENT_BINARY_DIR}/docs/Doxyfile)
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/docs/Doxyfile.in ${SPARSEPUSH_DOXYFILE} @ONLY)

add_custom_target(docs
  COMMAND ${CMAKE_COMMAND} -E make_directory ${SPARSEPUSH_DOCS_OUTPUT_DIR}
  COMMAND Doxygen::doxygen ${SPARSEPUSH_DOXYFILE}
  COMMAND ${CMAKE_COMMAND} -E echo "API reference: ${SPARSEPUSH_DOCS_OUTPUT_DIR}/html/index.html (warnings: ${SPARSEPUSH_DOCS_WARN_LOG})"
  WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}
  COMMENT "Running Doxygen over include/sparsepush"
  VERBATIM)

if(SPARSEPUSH_BUILD_TESTS)
  set(_sparsepush_docs_count_args
    -DDOXYGEN=${DOXYGEN_EXECUTABLE}
    -DDOXYFILE=${SPARSEPUSH_DOXYFILE}
    -DOUTPUT_DIR=${SPARSEPUSH_DOCS_OUTPUT_DIR}
    -DWARN_LOG=${SPARSEPUSH_DOCS_WARN_LOG}
    -DBASELINE_FILE=${CMAKE_CURRENT_SOURCE_DIR}/docs/api/undocumented-baseline.txt)
  add_test(NAME api_reference_undocumented_count
           COMMAND ${CMAKE_COMMAND} ${_sparsepush_docs_count_args}
                   -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/count-undocumented.cmake
           WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
  # The gate can fail: with a baseline of -1 any count is above it, and the counter must say so.
  add_test(NAME api_reference_undocumented_gate_refuses
           COMMAND ${CMAKE_COMMAND} ${_sparsepush_docs_count_args} -DBASELINE=-1
                   -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/count-undocumented.cmake
           WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
  # Both run Doxygen into the same output directory: never at the same time.
  set_tests_properties(api_reference_undocumented_count api_reference_undocumented_gate_refuses
    PROPERTIES LABELS "docs;shape" TIMEOUT 300 RESOURCE_LOCK sparsepush_doxygen)
  set_tests_properties(api_reference_undocumented_gate_refuses PROPERTIES
    PASS_REGULAR_EXPRESSION "REFUSED: [0-9]+ undocumented public names, more than the baseline -1")
endif()
