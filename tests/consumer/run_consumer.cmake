# Build and run the consumer project against sparsepush, either installed (MODE=package: install
# the build tree's package into a temporary prefix, then find_package) or as a subdirectory. The
# installed package is also asked for each combination of components (components/CMakeLists.txt):
# without components it looks up no dependency at all.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGV}")
  endif()
endfunction()
# The version to ask for: the header's MAJOR.MINOR (the package is compatible within a minor).
file(READ ${SOURCE_DIR}/include/sparsepush/config.hpp config_hpp)
if(NOT config_hpp MATCHES "#define SPARSEPUSH_VERSION_MAJOR +([0-9]+)")
  message(FATAL_ERROR "config.hpp does not define SPARSEPUSH_VERSION_MAJOR")
endif()
set(version ${CMAKE_MATCH_1})
if(NOT config_hpp MATCHES "#define SPARSEPUSH_VERSION_MINOR +([0-9]+)")
  message(FATAL_ERROR "config.hpp does not define SPARSEPUSH_VERSION_MINOR")
endif()
string(APPEND version .${CMAKE_MATCH_1})

# components(<case> <PASS | regex the failing configure must print> <-D arguments...>)
function(components name expect)
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/consumer/components
                          -B ${WORK_DIR}/components_${name} -G ${GENERATOR}
                          -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(expect STREQUAL "PASS")
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "components case '${name}' failed (${rc}): ${ARGN}\n${out}")
    endif()
  else()
    string(REGEX REPLACE "[ \n]+" " " flat "${out}")  # CMake wraps long messages
    if(rc EQUAL 0 OR NOT flat MATCHES "${expect}")
      message(FATAL_ERROR "components case '${name}' should fail saying '${expect}' (${rc}): ${ARGN}\n${out}")
    endif()
  endif()
  message(STATUS "components case '${name}': ok")
endfunction()

set(all_deps "MPI Boost ZLIB Eigen3 xtensor")
set(all_components "eigen xtensor boost_graph data mpi")
if(MODE STREQUAL "package")
  run(${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/lib -G ${GENERATOR}
      -DSPARSEPUSH_BUILD_TESTS=OFF -DSPARSEPUSH_BUILD_BENCH=OFF -DSPARSEPUSH_BUILD_EXAMPLES=OFF
      -DSPARSEPUSH_INSTALL=ON)
  run(${CMAKE_COMMAND} --install ${WORK_DIR}/lib --prefix ${WORK_DIR}/prefix)
  # No component: the headers, and not one dependency looked up.
  components(none PASS "-DFIND_ARGS=${version} REQUIRED" "-DNOT_LOOKED_UP=${all_deps}"
             "-DEXPECT_NO_TARGET=${all_components}")
  # Each component finds its dependency and nothing else's; an optional one may be missing.
  components(data PASS "-DFIND_ARGS=REQUIRED COMPONENTS data OPTIONAL_COMPONENTS mpi"
             -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON "-DLOOKED_UP=ZLIB" "-DNOT_LOOKED_UP=Boost Eigen3 xtensor"
             "-DEXPECT_FOUND=data" "-DEXPECT_MISSING=mpi" "-DEXPECT_NO_TARGET=eigen xtensor boost_graph")
  components(eigen PASS "-DFIND_ARGS=REQUIRED COMPONENTS eigen" "-DLOOKED_UP=Eigen3"
             "-DNOT_LOOKED_UP=MPI Boost ZLIB xtensor" "-DEXPECT_FOUND=eigen"
             "-DEXPECT_NO_TARGET=xtensor boost_graph data mpi")
  components(all PASS "-DFIND_ARGS=REQUIRED COMPONENTS eigen xtensor boost_graph data OPTIONAL_COMPONENTS mpi"
             "-DLOOKED_UP=${all_deps}" "-DEXPECT_FOUND=eigen xtensor boost_graph data" -DMPI_AS_FOUND=ON)
  # A REQUIRED component whose dependency is missing, or an unknown one, fails naming it.
  components(required_mpi_missing "sparsepush component 'mpi' needs MPI for C\\+\\+ \\(Debian package"
             "-DFIND_ARGS=REQUIRED COMPONENTS mpi" -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON)
  components(unknown "sparsepush component 'eigen3' is unknown \\(known: eigen"
             "-DFIND_ARGS=REQUIRED COMPONENTS eigen3")
  run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/consumer -B ${WORK_DIR}/build -G ${GENERATOR}
      -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCONSUMER_MODE=package -DSPARSEPUSH_VERSION_WANTED=${version})
else()
  run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/consumer -B ${WORK_DIR}/build -G ${GENERATOR}
      -DCONSUMER_MODE=subdirectory -DSPARSEPUSH_SOURCE_DIR=${SOURCE_DIR})
endif()
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run(${WORK_DIR}/build/consumer)
run(${WORK_DIR}/build/scsp_user)
