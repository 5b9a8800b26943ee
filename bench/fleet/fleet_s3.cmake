flightrec_add_executable(bench_fleet_upload
  SOURCES bench_fleet_upload.cc
  DEPS flightrec_recorder_fleet)
