# The headers-only install of docs/dev/building.md, on a machine with nothing but CMake and a compiler: configure
# SOURCE_DIR with default options (ARGS simulate missing packages), install without building into
# a temporary prefix, then check that the headers, the package config and a version file that
# matches include/sparsepush/config.hpp landed, and that the configure looked up no optional
# dependency. Run by ctest: cmake -DSOURCE_DIR=.. -DWORK_DIR=..
# -DGENERATOR=.. [-DARGS=a;b] -P check_install.cmake
cmake_minimum_required(VERSION 3.20)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGV}\n${out}")
  endif()
endfunction()
set(prefix ${WORK_DIR}/prefix)
run(${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/build -G ${GENERATOR} ${ARGS})
run(${CMAKE_COMMAND} --install ${WORK_DIR}/build --prefix ${prefix})

# Installing the headers looks up no optional dependency: no cache entry of find_package(MPI),
# Boost, ZLIB, Eigen3 or xtensor (a lookup leaves one, found or not).
file(STRINGS ${WORK_DIR}/build/CMakeCache.txt probes
     REGEX "^(MPI_CXX_COMPILER|MPI_CXX_WORKS|Boost_DIR|ZLIB_INCLUDE_DIR|Eigen3_DIR|xtensor_DIR)[:=]")
if(probes)
  message(FATAL_ERROR "a headers-only configure looked up optional dependencies:\n  ${probes}")
endif()

# Every public header, and only what the source tree has.
file(GLOB_RECURSE source_headers RELATIVE ${SOURCE_DIR}/include ${SOURCE_DIR}/include/*.hpp)
file(GLOB_RECURSE installed_headers RELATIVE ${prefix}/include ${prefix}/include/*)
list(SORT source_headers)
list(SORT installed_headers)
if(NOT "sparsepush/sparsepush.hpp" IN_LIST installed_headers OR
   NOT source_headers STREQUAL installed_headers)
  message(FATAL_ERROR "installed headers differ from include/:\n  source:    ${source_headers}\n"
                      "  installed: ${installed_headers}")
endif()

# The package: config, targets, components and version, in one <libdir>/cmake/sparsepush.
file(GLOB_RECURSE config RELATIVE ${prefix} ${prefix}/*/sparsepushConfig.cmake)
if(NOT config MATCHES "^lib[^;]*/cmake/sparsepush/sparsepushConfig.cmake$")
  message(FATAL_ERROR "expected one lib*/cmake/sparsepush/sparsepushConfig.cmake under ${prefix}, found '${config}'")
endif()
get_filename_component(package_dir ${prefix}/${config} DIRECTORY)
foreach(f IN ITEMS sparsepushConfigVersion.cmake sparsepushTargets.cmake sparsepushComponents.cmake)
  if(NOT EXISTS ${package_dir}/${f})
    message(FATAL_ERROR "${package_dir}/${f} was not installed")
  endif()
endforeach()

# The version is the header's, and find_package(sparsepush <that version> EXACT) accepts it.
file(READ ${SOURCE_DIR}/include/sparsepush/config.hpp config_hpp)
set(header_version "")
foreach(part IN ITEMS MAJOR MINOR PATCH)
  if(NOT config_hpp MATCHES "#define SPARSEPUSH_VERSION_${part} +([0-9]+)")
    message(FATAL_ERROR "config.hpp does not define SPARSEPUSH_VERSION_${part}")
  endif()
  set(PACKAGE_FIND_VERSION_${part} ${CMAKE_MATCH_1})
  list(APPEND header_version ${CMAKE_MATCH_1})
endforeach()
list(JOIN header_version . PACKAGE_FIND_VERSION)
set(PACKAGE_FIND_VERSION_COUNT 3)
include(${package_dir}/sparsepushConfigVersion.cmake)
if(NOT PACKAGE_VERSION STREQUAL PACKAGE_FIND_VERSION OR NOT PACKAGE_VERSION_EXACT)
  message(FATAL_ERROR "installed sparsepushConfigVersion.cmake says ${PACKAGE_VERSION}, "
                      "include/sparsepush/config.hpp says ${PACKAGE_FIND_VERSION}")
endif()
list(LENGTH installed_headers count)
message(STATUS "sparsepush ${PACKAGE_VERSION}: ${count} headers and ${config} installed without building")
