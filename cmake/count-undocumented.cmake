# Counts the public names of the API reference that have no documentation, and fails when there
# are more than the baseline. cmake/docs.cmake runs it as the test api_reference_undocumented_count:
#   cmake -DDOXYGEN=<doxygen> -DDOXYFILE=<build>/docs/Doxyfile -DOUTPUT_DIR=<build>/docs/api
#         -DWARN_LOG=<build>/docs/doxygen-warnings.log -DBASELINE_FILE=docs/api/undocumented-baseline.txt
#         [-DBASELINE=<n>] -P cmake/count-undocumented.cmake
# It runs Doxygen with the configured Doxyfile (whose WARN_LOGFILE is WARN_LOG) and counts its
# warnings about undocumented names: "Member ... is not documented.", "Compound ... is not
# documented." and the like. BASELINE, when given, replaces the number in BASELINE_FILE. After
# documenting names, lower the number in docs/api/undocumented-baseline.txt to the new count.
cmake_minimum_required(VERSION 3.20)

foreach(_var IN ITEMS DOXYGEN DOXYFILE OUTPUT_DIR WARN_LOG)
  if(NOT DEFINED ${_var} OR "${${_var}}" STREQUAL "")
    message(FATAL_ERROR "count-undocumented.cmake: pass -D${_var}=... (see the comment at its top)")
  endif()
endforeach()

if(NOT DEFINED BASELINE)
  if(NOT DEFINED BASELINE_FILE OR NOT EXISTS "${BASELINE_FILE}")
    message(FATAL_ERROR "count-undocumented.cmake: pass -DBASELINE=<n> or -DBASELINE_FILE=<file holding one integer>")
  endif()
  file(READ "${BASELINE_FILE}" BASELINE)
  string(STRIP "${BASELINE}" BASELINE)
endif()
if(NOT BASELINE MATCHES "^-?[0-9]+$")
  message(FATAL_ERROR "count-undocumented.cmake: the baseline '${BASELINE}' is not an integer")
endif()

file(REMOVE "${WARN_LOG}")
file(MAKE_DIRECTORY "${OUTPUT_DIR}")
execute_process(COMMAND "${DOXYGEN}" "${DOXYFILE}"
                RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
if(NOT _rc EQUAL 0 OR NOT EXISTS "${WARN_LOG}")
  message(FATAL_ERROR "doxygen ${DOXYFILE} failed (exit ${_rc}):\n${_out}${_err}")
endif()

# One warning per line: "<file>:<line>: warning: Member f(int) (function) of namespace
# sparsepush::v0 is not documented." A name Doxygen cannot see at all is no warning; a
# documented name with a bad comment is counted apart.
file(READ "${WARN_LOG}" _log)
string(REPLACE ";" "," _log "${_log}")  # a list element per line
string(REPLACE "\n" ";" _lines "${_log}")
set(_undocumented "")
set(_other 0)
foreach(_line IN LISTS _lines)
  if(_line MATCHES "warning: .* is not documented\\.?$")
    list(APPEND _undocumented "${_line}")
  elseif(_line MATCHES "warning: ")
    math(EXPR _other "${_other} + 1")
  endif()
endforeach()
list(REMOVE_DUPLICATES _undocumented)  # Doxygen reports some names twice (e.g. in nested namespaces)
list(LENGTH _undocumented _count)

message("undocumented public names: ${_count} (baseline ${BASELINE}); other Doxygen warnings: ${_other} (${WARN_LOG})")
if(_count GREATER 0)
  list(SUBLIST _undocumented 0 40 _first)
  list(JOIN _first "\n" _first)
  message("${_first}")
  if(_count GREATER 40)
    message("... and ${_count} in all: see ${WARN_LOG}")
  endif()
endif()
if(_count GREATER BASELINE)
  message("REFUSED: ${_count} undocumented public names, more than the baseline ${BASELINE}")
  message(FATAL_ERROR "Document the names listed above (/// comments in include/sparsepush; see ${WARN_LOG}).")
elseif(_count LESS BASELINE)
  message("Fewer than the baseline: lower docs/api/undocumented-baseline.txt to ${_count}.")
endif()
