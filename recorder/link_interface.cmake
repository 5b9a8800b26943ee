# link_interface_test: the query side of the recorder (analysis/, export/,
# record/, the query CLI library and the binaries built on them) must not
# link, directly or through any dependency, the daemon, a capture backend,
# ipc or Boost. At generate time every target's direct link libraries are
# written to ${CMAKE_BINARY_DIR}/link_graph.txt; at test time
# check_link_interface.cmake walks the closure of each checked target.

set(FLIGHTREC_LINK_CHECKED
    flightrec_recorder_record flightrec_recorder_analysis flightrec_recorder_export
    flightrec_recorder_query flightrec_fuzz_record_decode recorder_analysis_unittest
    recorder_export_unittest recorder_perf_data_unittest recorder_flamegraph_unittest)
set(FLIGHTREC_LINK_FORBIDDEN
    "^(flightrec_recorder_daemon|flightrec_recorder_capture_backends|flightrec_recorder_perf|flightrec_recorder_module|flightrec_recorder_ipc|Boost::.*)$")

function(_flightrec_collect_targets dir out)
  get_property(_t DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(_subs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(_s ${_subs})
    _flightrec_collect_targets(${_s} _more)
    list(APPEND _t ${_more})
  endforeach()
  set(${out} ${_t} PARENT_SCOPE)
endfunction()

# Runs once every folder has been added (deferred to the end of the top-level
# CMakeLists.txt), so that targets defined after recorder/ are in the graph.
function(flightrec_write_link_graph)
  _flightrec_collect_targets(${PROJECT_SOURCE_DIR} _targets)
  set(_content "")
  foreach(_t ${_targets})
    get_target_property(_type ${_t} TYPE)
    if(_type STREQUAL "INTERFACE_LIBRARY")
      set(_prop INTERFACE_LINK_LIBRARIES)
    elseif(_type MATCHES "^(STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY|OBJECT_LIBRARY|EXECUTABLE)$")
      set(_prop LINK_LIBRARIES)
    else()
      continue()
    endif()
    string(APPEND _content "${_t}|$<TARGET_PROPERTY:${_t},${_prop}>\n")
  endforeach()
  file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/link_graph.txt CONTENT "${_content}")
endfunction()
cmake_language(DEFER DIRECTORY ${PROJECT_SOURCE_DIR} CALL flightrec_write_link_graph)

add_test(NAME link_interface_test
         COMMAND ${CMAKE_COMMAND} -DGRAPH=${PROJECT_BINARY_DIR}/link_graph.txt
                 "-DCHECKED=${FLIGHTREC_LINK_CHECKED}" "-DFORBIDDEN=${FLIGHTREC_LINK_FORBIDDEN}"
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/check_link_interface.cmake)
set_tests_properties(link_interface_test PROPERTIES LABELS unit TIMEOUT 60)
