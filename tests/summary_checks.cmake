# Checks on sparsepush-train summaries (JSON text), for the -P scripts that compare two runs
# (check_jitter, check_straggler, check_threads_bits, check_lossy_training, mpi/train_async): include() it, then
#   summary_fields_equal(REF GOT "f;g" WHAT)    every field of the list is in REF, and equal in GOT
#   summary_field_null(JSON KEY WHAT)            JSON's KEY is null
#   decimal_as_integer(TEXT DIGITS OUT)          a plain decimal in units of 10^-DIGITS
#   summary_slower_at_least(PLAIN SLOW RATIO WHAT)
#       SLOW's train_seconds is at least RATIO (one decimal: 1.8) x PLAIN's, compared in whole
#       microseconds with integer arithmetic
# WHAT names the run in the messages ("with --jitter 4", "--threads 2").
include_guard(GLOBAL)

function(summary_fields_equal ref got fields what)
  foreach(f IN LISTS fields)
    string(JSON a ERROR_VARIABLE missing GET "${ref}" ${f})
    if(missing)
      message(FATAL_ERROR "the summary has no field ${f}")
    endif()
    string(JSON b GET "${got}" ${f})
    if(NOT a STREQUAL b)
      message(FATAL_ERROR "${what}: ${f} is ${b}, the reference run has ${a}")
    endif()
  endforeach()
endfunction()

function(summary_field_null json key what)
  string(JSON type TYPE "${json}" ${key})
  if(NOT type STREQUAL "NULL")
    message(FATAL_ERROR "a run ${what} has ${key} ${type}, not null")
  endif()
endfunction()

# decimal_as_integer(TEXT DIGITS OUT): a non-negative decimal without exponent ("0.8312") as an
# integer in units of 10^-DIGITS, truncated (CMake's math is integer only): 831200 for DIGITS 6
function(decimal_as_integer text digits out)
  if(NOT text MATCHES "^([0-9]+)(\\.([0-9]*))?$")
    message(FATAL_ERROR "${text} is not a plain decimal")
  endif()
  set(whole ${CMAKE_MATCH_1})
  string(REPEAT "0" ${digits} zeros)
  string(SUBSTRING "${CMAKE_MATCH_3}${zeros}" 0 ${digits} frac)
  string(REGEX REPLACE "^0+([0-9])" "\\1" frac "${frac}")
  math(EXPR v "${whole} * 1${zeros} + ${frac}")
  set(${out} ${v} PARENT_SCOPE)
endfunction()

# seconds (a JSON number without exponent) as whole microseconds
function(_summary_micros json key out)
  string(JSON v GET "${json}" ${key})
  decimal_as_integer("${v}" 6 us)
  set(${out} ${us} PARENT_SCOPE)
endfunction()

function(summary_slower_at_least plain slow min_ratio what)
  _summary_micros("${plain}" train_seconds t_plain)
  _summary_micros("${slow}" train_seconds t_slow)
  # min_ratio with one decimal (1.8): compare 10 x slow with (10 x min_ratio) x plain
  if(NOT min_ratio MATCHES "^[0-9]+\\.[0-9]$")
    message(FATAL_ERROR "MIN_RATIO must have one decimal (e.g. 1.8), got ${min_ratio}")
  endif()
  string(REPLACE "." "" ratio10 "${min_ratio}")
  math(EXPR lhs "${t_slow} * 10")
  math(EXPR rhs "${t_plain} * ${ratio10}")
  if(lhs LESS rhs)
    message(FATAL_ERROR "${what} the rounds took ${t_slow} us, without it ${t_plain} us: less than ${min_ratio}x")
  endif()
  message(STATUS "${what} the rounds took ${t_slow} us against ${t_plain} us (at least ${min_ratio}x)")
endfunction()
