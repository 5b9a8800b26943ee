# The PostgreSQL half: a real PostgreSQL 15 started once per test binary
# (fleet_pg_server), run as the `postgres` account, so these need root.
# libpq comes through flightrec_fleet_pg (pkg-config targets are per folder).
add_library(fleet_pg_server STATIC ${CMAKE_CURRENT_LIST_DIR}/fleet_pg_server.cc)
target_include_directories(fleet_pg_server PUBLIC ${PROJECT_SOURCE_DIR})
target_compile_options(fleet_pg_server PRIVATE ${FLIGHTREC_WARNINGS})
target_link_libraries(fleet_pg_server PUBLIC flightrec_fleet_pg fmt::fmt
                      GTest::gtest)

flightrec_add_test(fleet_index_pg_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/fleet_index_pg_test.cc
  DEPS flightrec_fleet_pg fleet_pg_server
  LABELS root
  TIMEOUT 300)

flightrec_add_test(fleet_cli_pg_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/fleet_cli_pg_test.cc
  DEPS flightrec_fleet_pg fleet_pg_server flightrec_test_support flightrec_store flightrec_coredump
       nlohmann_json::nlohmann_json
  LABELS root
  TIMEOUT 300)
add_dependencies(fleet_cli_pg_test recorder fr_crash)
