# cmake -DROOT=source-dir -DALLOWED="path:name;..." -P this
# Fails when code outside recorder/record/ names a section of the record
# format: a section name as a string literal, or one of record/'s section
# constants (kSection..., kCrashSection). The names are read from
# recorder/record/*.h, so a new section is checked without editing this file.
# It proves it can fail: the names must be found where record/ defines them.

cmake_minimum_required(VERSION 3.20)

file(GLOB _defs ${ROOT}/recorder/record/*.h)
set(_names "")
foreach(_f ${_defs})
  file(STRINGS ${_f} _lines REGEX "\"[a-z_]+\";")
  foreach(_l ${_lines})
    if(_l MATCHES "kSection[A-Za-z]* = \"([a-z_]+)\"")
      list(APPEND _names ${CMAKE_MATCH_1})
    elseif(_l MATCHES "^  const char\\* [a-z_]+ = \"([a-z_]+)\";")
      list(APPEND _names ${CMAKE_MATCH_1})
    endif()
  endforeach()
endforeach()
list(REMOVE_DUPLICATES _names)
list(LENGTH _names _count)
if(_count LESS 10)
  message(FATAL_ERROR "found only ${_count} section names in recorder/record/*.h (${_names}): the check is broken")
endif()

file(GLOB_RECURSE _files RELATIVE ${ROOT}
     ${ROOT}/recorder/*.cc ${ROOT}/recorder/*.h ${ROOT}/coredump-hook/*.cc ${ROOT}/coredump-hook/*.h
     ${ROOT}/fuzz/*.cc ${ROOT}/fuzz/*.h)
list(FILTER _files EXCLUDE REGEX "^recorder/record/|_unittest\\.cc$")

set(_found "")
set(_stale "${ALLOWED}")
foreach(_f ${_files})
  file(READ ${ROOT}/${_f} _text)
  # Comments may name sections: only code counts.
  string(REGEX REPLACE "//[^\n]*" "" _text "${_text}")
  set(_hits "")
  foreach(_n ${_names})
    string(FIND "${_text}" "\"${_n}\"" _at)
    if(_at GREATER -1)
      list(APPEND _hits ${_n})
    endif()
  endforeach()
  string(REGEX MATCHALL "k(Crash)?Section[A-Za-z]*" _consts "${_text}")
  list(APPEND _hits ${_consts})
  list(REMOVE_DUPLICATES _hits)
  foreach(_h ${_hits})
    list(REMOVE_ITEM _stale "${_f}:${_h}")
    if(NOT "${_f}:${_h}" IN_LIST ALLOWED)
      list(APPEND _found "${_f}:${_h}")
    endif()
  endforeach()
endforeach()

# Stale entries fail too, so that the allow-list only shrinks.
set(_why_found "section names outside recorder/record/ (use record/'s typed readers and writers)")
set(_why_stale "allow-list entries no longer needed (remove them from recorder/record_names.cmake)")
foreach(_kind found stale)
  if(_${_kind})
    list(JOIN _${_kind} "\n  " _msg)
    message(FATAL_ERROR "${_why_${_kind}}:\n  ${_msg}")
  endif()
endforeach()
message(STATUS "${_count} section names; none outside recorder/record/ but the allow-list")
