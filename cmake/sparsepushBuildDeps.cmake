# What sparsepush's own tests, benchmarks and examples need beyond CMake and a C++20 compiler (the
# library needs nothing). A missing piece stops the configure with one message that names its
# Debian package, cmake/install-deps.sh and the option to turn off; the subdirectories then find
# everything already found here. Included by the top-level CMakeLists.txt after the components.

# sparsepush_need_package(<option> <debian-package> <find_package arguments...>)
macro(sparsepush_need_package option debian package)
  find_package(${package} ${ARGN} QUIET)
  if(NOT ${package}_FOUND)
    message(FATAL_ERROR "${option}=ON needs ${package} (Debian package ${debian}), which was not found. "
                        "Run cmake/install-deps.sh, or configure with -D${option}=OFF.")
  endif()
endmacro()

# sparsepush_need_target(<option> <debian-package> <what> <target>): an optional component.
function(sparsepush_need_target option debian what target)
  if(NOT TARGET ${target})
    message(FATAL_ERROR "${option}=ON needs ${what} for ${target} (Debian package ${debian}), which was "
                        "not found. Run cmake/install-deps.sh, or configure with -D${option}=OFF.")
  endif()
endfunction()

if(SPARSEPUSH_BUILD_TESTS)
  sparsepush_need_package(SPARSEPUSH_BUILD_TESTS catch2 Catch2 2)
  sparsepush_need_package(SPARSEPUSH_BUILD_TESTS zlib1g-dev ZLIB)  # independent CRC-32 reference
  # Random123 is only a test dependency: our Philox is checked against it bit for bit.
  find_path(RANDOM123_INCLUDE_DIR Random123/philox.h)
  if(NOT RANDOM123_INCLUDE_DIR)
    message(FATAL_ERROR "SPARSEPUSH_BUILD_TESTS=ON needs the Random123 headers (Debian package "
                        "librandom123-dev), which were not found. Run cmake/install-deps.sh, or "
                        "configure with -DSPARSEPUSH_BUILD_TESTS=OFF.")
  endif()
  # Every adapter is tested, and every public header compiles on its own; MPI's tests run where
  # MPI is found.
  foreach(_sparsepush_comp IN ITEMS eigen xtensor boost_graph data mpi)
    sparsepush_find_component(${_sparsepush_comp})
  endforeach()
  sparsepush_need_target(SPARSEPUSH_BUILD_TESTS libeigen3-dev "Eigen 3" sparsepush::eigen)
  sparsepush_need_target(SPARSEPUSH_BUILD_TESTS xtensor-dev xtensor sparsepush::xtensor)
  sparsepush_need_target(SPARSEPUSH_BUILD_TESTS libboost-graph-dev "Boost.Graph" sparsepush::boost_graph)
  sparsepush_need_target(SPARSEPUSH_BUILD_TESTS zlib1g-dev "zlib" sparsepush::data)
endif()

if(SPARSEPUSH_BUILD_BENCH)
  sparsepush_need_package(SPARSEPUSH_BUILD_BENCH libbenchmark-dev benchmark)
  sparsepush_find_component(eigen)
  sparsepush_find_component(mpi)  # bench_mpi, where MPI is found
  sparsepush_need_target(SPARSEPUSH_BUILD_BENCH libeigen3-dev "Eigen 3" sparsepush::eigen)  # bench_nn
endif()

if(SPARSEPUSH_BUILD_EXAMPLES)
  # sparsepush-train: options (CLI11), JSON summary (nlohmann-json), the reference backend (Eigen)
  # and the IDX reader (zlib).
  sparsepush_need_package(SPARSEPUSH_BUILD_EXAMPLES libcli11-dev CLI11 CONFIG)
  sparsepush_need_package(SPARSEPUSH_BUILD_EXAMPLES nlohmann-json3-dev nlohmann_json 3 CONFIG)
  # --transport mpi and one_node_mpi where MPI is found (-DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON: none)
  foreach(_sparsepush_comp IN ITEMS eigen data mpi)
    sparsepush_find_component(${_sparsepush_comp})
  endforeach()
  sparsepush_need_target(SPARSEPUSH_BUILD_EXAMPLES libeigen3-dev "Eigen 3" sparsepush::eigen)
  sparsepush_need_target(SPARSEPUSH_BUILD_EXAMPLES zlib1g-dev "zlib" sparsepush::data)
  # Needed only when it runs, so their absence is a warning: --plot calls gnuplot, and the
  # training runs read Debian's Fashion-MNIST unless given --data.
  find_program(SPARSEPUSH_GNUPLOT gnuplot)
  if(NOT SPARSEPUSH_GNUPLOT)
    message(WARNING "gnuplot not found (Debian package gnuplot-nox): sparsepush-train --plot refuses to "
                    "run (exit 2) and its tests with --plot fail. Run cmake/install-deps.sh.")
  endif()
  if(NOT EXISTS /usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz)
    message(WARNING "Fashion-MNIST not found in /usr/share/datasets/fashion-mnist (Debian package "
                    "dataset-fashion-mnist): sparsepush-train needs --data DIR, and its tests fail. "
                    "Run cmake/install-deps.sh.")
  endif()
endif()
