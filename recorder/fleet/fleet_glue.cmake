# Where fleet mode's two halves meet: the shipper's on_uploaded indexing the
# record in PostgreSQL, and the S3 client as the record cache's fetcher.
flightrec_add_library(flightrec_fleet_glue
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/fleet_glue.cc
  DEPS flightrec_fleet_pg flightrec_recorder_fleet flightrec_common spdlog::spdlog)
