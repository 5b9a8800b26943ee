# The fleet index in PostgreSQL (libpq), crash signatures and the local cache
# of records fetched from the fleet: flightrec_fleet_pg.
pkg_check_modules(LIBPQ REQUIRED IMPORTED_TARGET libpq)
pkg_check_modules(LIBCRYPTO REQUIRED IMPORTED_TARGET libcrypto)
flightrec_add_library(flightrec_fleet_pg
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/fleet_index.cc ${CMAKE_CURRENT_LIST_DIR}/crash_signature.cc
          ${CMAKE_CURRENT_LIST_DIR}/digest_pg.cc ${CMAKE_CURRENT_LIST_DIR}/record_cache.cc
          ${CMAKE_CURRENT_LIST_DIR}/index_shipped_pg.cc
  DEPS flightrec_common flightrec_store PkgConfig::LIBPQ PkgConfig::LIBCRYPTO fmt::fmt
       nlohmann_json::nlohmann_json)

flightrec_add_test(fleet_pg_unittest
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/crash_signature_unittest.cc
          ${CMAKE_CURRENT_LIST_DIR}/record_cache_unittest.cc
  DEPS flightrec_fleet_pg flightrec_store flightrec_test_support)
