# docs/cli.md documents exactly the flags of sparsepush-train --help, with --help's defaults.
# Fails naming each flag --help lists that cli.md does not define, each flag cli.md defines or
# mentions that --help does not list, and each default that differs.
#
# Usage: cmake -DTRAIN=path/to/sparsepush-train -DDOC=path/to/docs/cli.md -P check_cli_doc.cmake
# Doctoring, for the tests that prove the check can fail (the file itself is never changed):
#   -DDROP=--flag     remove the definition line of --flag before checking
#   -DADD=--flag      add a definition line of --flag (one --help does not list)
#   -DDEFAULT=--flag  change the default in --flag's definition line to `doctored`
#
# What --help gives (CLI11): an option line starts with two spaces and the option's names
# ("--nodes", "-h,--help"); a value option adds " TYPE" ("TEXT"), "=DEFAULT" when it has a
# default (" [DEFAULT]" in newer CLI11 releases), and " ..." when it repeats; the description
# follows after one or more spaces (one only where the names fill the column:
# "--eval-average-every TEXT=0 rounds between ...").
#
# What cli.md must give: one definition line per flag, a table row whose first cell holds the
# flag's names as code spans, each span a name and its value's placeholder, and whose second cell
# is the default:
#   | `--nodes N` | `16` | what it does |
#   | `-h`, `--help` | off | ... |
# The default cell is `D` (exactly one code span) where --help prints "=D", with the same D; where
# --help prints no default it is anything but a single code span (off, none, from the compressor).
#
# Mentions: every --name in a code span of the text (outside fenced blocks) must be a flag of
# --help. Flags of other programs do not count, by this rule:
# - in a code span or a fenced line that names sparsepush-train, only the words after that name
#   count (so mpirun's options before it do not);
# - a code span that does not name sparsepush-train counts only when it begins with a flag
#   (`--staleness 0|N|inf`, `--straggler 3:3 --straggler 12-15:2.5`); one that begins with another word is another program's
#   command (`cmake --build build`, `mpirun -np 2`) and is not read;
# - in fenced code blocks only lines that name sparsepush-train are read (the other lines are
#   other commands: cmake, ctest, bash, mpirun without the program), and not a shell comment
#   after '#';
# - FOREIGN lists the flags of other programs that the text names in a code span of their own,
#   each with its reason.
set(FOREIGN
    --allow-run-as-root   # mpirun's (Open MPI): needed to run as root
    --oversubscribe)      # mpirun's (Open MPI): more ranks than cores

foreach(v TRAIN DOC)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "usage: cmake -DTRAIN=sparsepush-train -DDOC=docs/cli.md -P check_cli_doc.cmake")
  endif()
endforeach()

# Text to list of lines: ';', '[', ']' and '\' would split or escape CMake list elements.
function(to_lines text out)
  string(REPLACE "\\" "<BS>" text "${text}")
  string(REPLACE ";" "<SC>" text "${text}")
  string(REPLACE "[" "<LB>" text "${text}")
  string(REPLACE "]" "<RB>" text "${text}")
  string(REPLACE "\n" ";" text "${text}")
  set(${out} "${text}" PARENT_SCOPE)
endfunction()
function(restore text out)
  string(REPLACE "<SC>" ";" text "${text}")
  string(REPLACE "<LB>" "[" text "${text}")
  string(REPLACE "<RB>" "]" text "${text}")
  string(REPLACE "<BS>" "\\" text "${text}")
  set(${out} "${text}" PARENT_SCOPE)
endfunction()
# The --names in TEXT (a code span or a command line): words that begin with "--".
function(flags_in text out)
  string(REGEX MATCHALL "[^A-Za-z0-9_-]--[A-Za-z0-9][A-Za-z0-9_-]*" found " ${text}")
  set(names "")
  foreach(f IN LISTS found)
    string(SUBSTRING "${f}" 1 -1 f)
    list(APPEND names "${f}")
  endforeach()
  set(${out} "${names}" PARENT_SCOPE)
endfunction()

# --help: every name (long and short) and its default.
execute_process(COMMAND ${TRAIN} --help OUTPUT_VARIABLE help ERROR_VARIABLE help_err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT help MATCHES "Options:")
  message(FATAL_ERROR "${TRAIN} --help failed (${rc}): ${help}${help_err}")
endif()
to_lines("${help}" help_lines)
set(help_flags "")    # long names, in --help's order
set(help_shorts "")   # "-h=--help": a short alias and its long name
foreach(line IN LISTS help_lines)
  if(NOT "${line} " MATCHES "^  ((-[A-Za-z0-9],)*--[A-Za-z0-9][A-Za-z0-9_-]*(,--[A-Za-z0-9][A-Za-z0-9_-]*)*)( [A-Z]+(=[^ ]*| <LB>[^<]*<RB>)?( \\.\\.\\.)?)? ")
    continue()
  endif()
  set(names "${CMAKE_MATCH_1}")
  set(dflt "${CMAKE_MATCH_5}")
  string(REPLACE "," ";" names "${names}")
  set(long "")
  set(shorts "")
  foreach(n IN LISTS names)
    if(n MATCHES "^--")
      set(long "${n}")
      list(APPEND help_flags "${n}")
      if(dflt STREQUAL "")
        set(help_default_${n} "<none>")
      else()
        string(REGEX REPLACE "^(=| <LB>)(.*)" "\\2" d "${dflt}")   # "=D", or " [D]" (newer CLI11)
        string(REGEX REPLACE "<RB>$" "" d "${d}")
        set(help_default_${n} "${d}")
      endif()
    else()
      list(APPEND shorts "${n}")
    endif()
  endforeach()
  foreach(s IN LISTS shorts)
    list(APPEND help_shorts "${s}=${long}")
  endforeach()
endforeach()
list(LENGTH help_flags n_help)
if(n_help LESS 10)
  message(FATAL_ERROR "read only ${n_help} flags from ${TRAIN} --help; has its format changed?\n${help}")
endif()

# cli.md, doctored when asked.
file(READ "${DOC}" doc)
to_lines("${doc}" doc_lines)
set(problems "")
if(DEFINED ADD)
  list(APPEND doc_lines "| `${ADD} X` | none | a flag added by the check's own test |")
endif()
set(lines "")
set(dropped FALSE)
foreach(line IN LISTS doc_lines)
  if(DEFINED DROP AND line MATCHES "^\\|[^|]*`${DROP}[ `]")
    set(dropped TRUE)
    continue()
  endif()
  if(DEFINED DEFAULT AND line MATCHES "^\\|[^|]*`${DEFAULT}[ `]")
    string(REGEX REPLACE "^(\\|[^|]*\\|)[^|]*\\|" "\\1 `doctored` |" line "${line}")
  endif()
  list(APPEND lines "${line}")
endforeach()
if(DEFINED DROP AND NOT dropped)
  message(FATAL_ERROR "-DDROP=${DROP}: ${DOC} has no definition line of ${DROP} to drop")
endif()

set(doc_flags "")
set(doc_names "")     # every name a definition line gives, short ones included
set(mentions "")      # "--name@line"
set(fenced FALSE)
set(number 0)
foreach(line IN LISTS lines)
  math(EXPR number "${number} + 1")
  if(line MATCHES "^ *```")
    if(fenced)
      set(fenced FALSE)
    else()
      set(fenced TRUE)
    endif()
    continue()
  endif()
  if(fenced)
    string(FIND "${line}" "sparsepush-train" at)
    if(at GREATER -1)
      string(SUBSTRING "${line}" ${at} -1 args)
      string(REGEX REPLACE "#.*" "" args "${args}")   # a shell comment
      flags_in("${args}" found)
      foreach(f IN LISTS found)
        list(APPEND mentions "${f}@${number}")
      endforeach()
    endif()
    continue()
  endif()
  # A definition line: its first cell's code spans name the flag.
  set(first "")
  if(line MATCHES "^\\|([^|]*)\\|([^|]*)\\|")
    set(first "${CMAKE_MATCH_1}")
    string(STRIP "${CMAKE_MATCH_2}" cell)
  endif()
  if(first MATCHES "^ *`-")
    string(REGEX MATCHALL "`[^`]*`" spans "${first}")
    set(long "")
    foreach(span IN LISTS spans)
      string(REGEX REPLACE "^`([^ `]*).*" "\\1" name "${span}")
      if(NOT name MATCHES "^-")
        continue()
      endif()
      list(APPEND doc_names "${name}")
      if(name MATCHES "^--")
        set(long "${name}")
        list(FIND doc_flags "${name}" seen)
        if(seen GREATER -1)
          string(APPEND problems "  docs/cli.md defines ${name} twice (line ${number})\n")
        endif()
        list(APPEND doc_flags "${name}")
        set(doc_default_${name} "${cell}")
        set(doc_line_${name} ${number})
      endif()
    endforeach()
  endif()
  # Mentions: the code spans of the text.
  string(REGEX MATCHALL "`[^`]*`" spans "${line}")
  foreach(span IN LISTS spans)
    string(FIND "${span}" "sparsepush-train" at)
    if(at GREATER -1)
      string(SUBSTRING "${span}" ${at} -1 span)
    elseif(NOT span MATCHES "^` *-")
      continue()   # another command's line (`cmake --build build`, `mpirun -np 2`)
    endif()
    flags_in("${span}" found)
    foreach(f IN LISTS found)
      list(APPEND mentions "${f}@${number}")
    endforeach()
  endforeach()
endforeach()

# --help's flags that cli.md lacks, and their defaults.
foreach(f IN LISTS help_flags)
  list(FIND doc_flags "${f}" i)
  if(i EQUAL -1)
    string(APPEND problems "  --help lists ${f}, which docs/cli.md does not define (give it a row | `${f} ...` | default | ... |)\n")
    continue()
  endif()
  restore("${help_default_${f}}" want)
  restore("${doc_default_${f}}" have)
  if(want STREQUAL "<none>")
    if(have MATCHES "^`[^`]*`$")
      string(APPEND problems "  ${f}: docs/cli.md (line ${doc_line_${f}}) gives the default ${have}, but --help prints none\n")
    endif()
  elseif(NOT have STREQUAL "`${want}`")
    string(APPEND problems "  ${f}: docs/cli.md (line ${doc_line_${f}}) gives the default '${have}', --help '${want}' (write `${want}`)\n")
  endif()
endforeach()
foreach(pair IN LISTS help_shorts)
  string(REPLACE "=" ";" pair "${pair}")
  list(GET pair 0 s)
  list(GET pair 1 l)
  list(FIND doc_names "${s}" i)
  if(i EQUAL -1)
    string(APPEND problems "  --help lists ${s} (${l}), which docs/cli.md's definition of ${l} does not name\n")
  endif()
endforeach()
# cli.md's flags that --help lacks.
foreach(f IN LISTS doc_names)
  if(f MATCHES "^--")
    list(FIND help_flags "${f}" i)
  else()
    string(REGEX MATCH "(^|;)${f}=" i "${help_shorts}")
    if(i STREQUAL "")
      set(i -1)
    endif()
  endif()
  if(i EQUAL -1)
    string(APPEND problems "  docs/cli.md defines ${f}, which --help does not list\n")
  endif()
endforeach()
set(n_mentions 0)
foreach(m IN LISTS mentions)
  string(REPLACE "@" ";" m "${m}")
  list(GET m 0 f)
  list(GET m 1 at)
  math(EXPR n_mentions "${n_mentions} + 1")
  list(FIND help_flags "${f}" i)
  list(FIND FOREIGN "${f}" foreign)
  if(i EQUAL -1 AND foreign EQUAL -1)
    string(APPEND problems "  docs/cli.md mentions ${f} (line ${at}), which --help does not list\n")
  endif()
endforeach()

if(NOT problems STREQUAL "")
  message(FATAL_ERROR "${DOC} and ${TRAIN} --help disagree:\n${problems}")
endif()
list(LENGTH doc_flags n_doc)
message("docs/cli.md defines the ${n_doc} flags of sparsepush-train --help with its defaults; "
        "${n_mentions} mentions of flags name flags of --help")
