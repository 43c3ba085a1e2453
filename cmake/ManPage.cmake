# Writes a man page of PROGRAM with help2man from the program's own --help (one source of truth): its options,
# and for a CLI11 program each subcommand's --help in a COMMANDS section.
# cmake -DHELP2MAN=... -DPROGRAM=... -DOUTPUT=... -DNAME="one line" -DVERSION=... [-DOFFSCREEN=ON] -P ManPage.cmake
set(env "")
if(OFFSCREEN)
  set(env "QT_QPA_PLATFORM=offscreen")  # the workbench's --help needs a Qt platform, not a display
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env ${env} "${PROGRAM}" --help OUTPUT_VARIABLE help RESULT_VARIABLE rc
                ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${PROGRAM} --help failed (${rc}): ${err}")
endif()

# roff: a backslash is \e, a minus \- (an ASCII hyphen, so that options copied from the page work), and a line
# starting with . or ' needs \& before it.
function(to_roff text out)
  string(REPLACE "\\" "\\e" text "${text}")
  string(REPLACE "-" "\\-" text "${text}")
  string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" text "${text}")
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

set(include "${OUTPUT}.h2m")
set(extra "")
# CLI11 lists the subcommands after "Subcommands:", one "  name   description" a line.
string(FIND "${help}" "\nSubcommands:\n" at)
if(NOT at EQUAL -1)
  string(SUBSTRING "${help}" ${at} -1 tail)
  string(REGEX MATCHALL "\n  [a-z][a-z0-9-]*  " names "${tail}")
  set(commands "")
  foreach(n IN LISTS names)
    string(STRIP "${n}" n)
    execute_process(COMMAND "${PROGRAM}" ${n} --help OUTPUT_VARIABLE sub RESULT_VARIABLE rc ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "${PROGRAM} ${n} --help failed (${rc}): ${err}")
    endif()
    to_roff("${sub}" sub)
    string(APPEND commands ".SS \"${n}\"\n.nf\n${sub}.fi\n")
  endforeach()
  if(NOT commands STREQUAL "")
    string(APPEND extra "[COMMANDS]\nEach command has its own options (strata-train COMMAND --help):\n${commands}\n")
  endif()
endif()
string(APPEND extra "[SEE ALSO]\n${SEE_ALSO}\n")
file(WRITE "${include}" "${extra}")

execute_process(COMMAND ${CMAKE_COMMAND} -E env ${env} "${HELP2MAN}" --no-info
                        "--name=${NAME}" "--version-string=${VERSION}" "--include=${include}"
                        "--output=${OUTPUT}" "${PROGRAM}"
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "help2man failed for ${PROGRAM} (${rc}): ${err}")
endif()
