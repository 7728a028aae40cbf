# Optional components of sparsepush, shared by the build tree and the installed package. Each one
# is an INTERFACE target over one dependency, and its dependency is looked up only when the
# component is asked for, so sparsepush::sparsepush (the headers) never looks anything up:
#   eigen        sparsepush::eigen        adapters/eigen.hpp, nn/        Eigen 3.3+
#   xtensor      sparsepush::xtensor      adapters/xtensor.hpp           xtensor 0.24
#   boost_graph  sparsepush::boost_graph  adapters/boost_graph.hpp       Boost.Graph 1.74 (headers)
#   data         sparsepush::data         data/idx.hpp                   zlib
#   mpi          sparsepush::mpi          transport/mpi.hpp              MPI (the C API); with SPARSEPUSH_SMPI
#                                                                          set, SimGrid's SMPI (compiler smpicxx)
# sparsepush_find_component(<name>) looks one up, quietly, and sets sparsepush_<name>_FOUND; the
# target is defined only where the dependency is found, and a second call looks nothing up again.
set(SPARSEPUSH_KNOWN_COMPONENTS eigen xtensor boost_graph data mpi)
# What each component needs, for the message of a REQUIRED component that is not found.
set(_sparsepush_needs_eigen "Eigen 3.3 or later (Debian package libeigen3-dev)")
set(_sparsepush_needs_xtensor "xtensor (Debian package xtensor-dev)")
set(_sparsepush_needs_boost_graph "Boost 1.74 or later with Boost.Graph (Debian package libboost-graph-dev)")
set(_sparsepush_needs_data "zlib (Debian package zlib1g-dev)")
set(_sparsepush_needs_mpi "MPI for C++ (Debian package libopenmpi-dev or libmpich-dev)")

# _sparsepush_add_component(<name> <dependency targets...>): sparsepush::<name> over them.
function(_sparsepush_add_component name)
  add_library(sparsepush_${name} INTERFACE IMPORTED GLOBAL)
  target_link_libraries(sparsepush_${name} INTERFACE sparsepush::sparsepush ${ARGN})
  add_library(sparsepush::${name} ALIAS sparsepush_${name})
endfunction()

# A macro, not a function: what find_package sets (MPIEXEC_EXECUTABLE, Boost_VERSION...) stays
# visible to the caller, as it would after calling find_package itself.
macro(sparsepush_find_component _sparsepush_name)
  if(NOT "${_sparsepush_name}" IN_LIST SPARSEPUSH_KNOWN_COMPONENTS)
    message(FATAL_ERROR "sparsepush has no component '${_sparsepush_name}' (known: ${SPARSEPUSH_KNOWN_COMPONENTS})")
  endif()
  if(NOT TARGET sparsepush::${_sparsepush_name})
    if("${_sparsepush_name}" STREQUAL "eigen")
      find_package(Eigen3 3.3 QUIET NO_MODULE)
      if(TARGET Eigen3::Eigen)
        _sparsepush_add_component(eigen Eigen3::Eigen)
      endif()
    elseif("${_sparsepush_name}" STREQUAL "xtensor")
      find_package(xtensor QUIET)
      if(TARGET xtensor)
        _sparsepush_add_component(xtensor xtensor)
      endif()
    elseif("${_sparsepush_name}" STREQUAL "boost_graph")
      find_package(Boost 1.74 QUIET)
      if(TARGET Boost::headers)
        _sparsepush_add_component(boost_graph Boost::headers)
      elseif(TARGET Boost::boost)
        _sparsepush_add_component(boost_graph Boost::boost)
      endif()
    elseif("${_sparsepush_name}" STREQUAL "data")
      find_package(ZLIB QUIET)
      if(TARGET ZLIB::ZLIB)
        _sparsepush_add_component(data ZLIB::ZLIB)
      endif()
    elseif("${_sparsepush_name}" STREQUAL "mpi" AND SPARSEPUSH_SMPI)
      # SimGrid's SMPI: smpicxx, the compiler, brings SMPI's mpi.h and libsimgrid; the library then
      # reads the simulated clock and sleeps in simulated time (clock.hpp)
      _sparsepush_add_component(mpi)
      target_compile_definitions(sparsepush_mpi INTERFACE SPARSEPUSH_SMPI)
    elseif("${_sparsepush_name}" STREQUAL "mpi")
      find_package(MPI QUIET COMPONENTS CXX)
      if(TARGET MPI::MPI_CXX)
        _sparsepush_add_component(mpi MPI::MPI_CXX)
        # the C API only: keep the deprecated C++ bindings (and their warnings) out
        target_compile_definitions(sparsepush_mpi INTERFACE OMPI_SKIP_MPICXX MPICH_SKIP_MPICXX)
      endif()
    endif()
  endif()
  if(TARGET sparsepush::${_sparsepush_name})
    set(sparsepush_${_sparsepush_name}_FOUND TRUE)
  else()
    set(sparsepush_${_sparsepush_name}_FOUND FALSE)
  endif()
endmacro()
