# Fleet index insert rate vs COPY, on a PostgreSQL 15 it starts itself
# (tests/fleet's server fixture). Run as root: bench_index_pg --records N.
flightrec_add_executable(bench_index_pg
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/bench_index_pg.cc
  DEPS flightrec_fleet_pg fleet_pg_server)
