# The Python module's dependencies (python/CMakeLists.txt): Python 3 (interpreter and development
# headers: Debian python3-dev), pybind11 (pybind11-dev) and the DLPack header (libdlpack-dev).
# sparsepush_find_python(<result-var>) finds them quietly and sets the variable to whether all are
# there; SPARSEPUSH_PYTHON_MISSING then names the Debian packages of what is not.
#
# Debian's packages (numpy, pytest, torch, mpi4py, pybind11) are for /usr/bin/python3: unless the
# configure names another interpreter (-DPython3_EXECUTABLE=...), that is the one used, not a
# python3 found first on PATH (pyenv, a virtual environment without them).
macro(sparsepush_find_python result)  # a macro: Python3_* and pybind11's variables stay visible
  if(NOT Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
    set(Python3_EXECUTABLE /usr/bin/python3 CACHE FILEPATH "The Python of the sparsepush module")
  endif()
  find_package(Python3 3.8 COMPONENTS Interpreter Development.Module QUIET)
  set(SPARSEPUSH_PYTHON_MISSING "")
  if(NOT Python3_FOUND)
    list(APPEND SPARSEPUSH_PYTHON_MISSING "python3-dev (Python 3 headers)")
  else()
    find_package(pybind11 2.6 CONFIG QUIET)
    if(NOT pybind11_FOUND)
      list(APPEND SPARSEPUSH_PYTHON_MISSING "pybind11-dev (pybind11)")
    endif()
  endif()
  find_path(SPARSEPUSH_DLPACK_INCLUDE_DIR dlpack/dlpack.h)
  if(NOT SPARSEPUSH_DLPACK_INCLUDE_DIR)
    list(APPEND SPARSEPUSH_PYTHON_MISSING "libdlpack-dev (dlpack/dlpack.h)")
  endif()
  if(SPARSEPUSH_PYTHON_MISSING)
    set(${result} OFF)
  else()
    set(${result} ON)
  endif()
endmacro()

# Where `cmake --install` puts the module, relative to the prefix: the directory the interpreter
# searches under a prefix (Debian: lib/python3.X/dist-packages, so that the prefix /usr/local needs
# no PYTHONPATH; elsewhere lib/python3.X/site-packages).
function(sparsepush_python_install_dir result)
  execute_process(
    COMMAND ${Python3_EXECUTABLE} -c [[
import sys, sysconfig
v = "python%d.%d" % sys.version_info[:2]
deb = "lib/%s/dist-packages" % v
print(deb if any(p.endswith(deb) for p in sys.path) else "lib/%s/site-packages" % v)]]
    OUTPUT_VARIABLE dir OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR NOT dir)
    set(dir "lib/python${Python3_VERSION_MAJOR}.${Python3_VERSION_MINOR}/site-packages")
  endif()
  set(${result} "${dir}" PARENT_SCOPE)
endfunction()
