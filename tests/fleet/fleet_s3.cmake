# Fleet mode against the real engines: one ctest, one Ceph cluster (mon, mgr,
# memstore osd, radosgw on loopback; tests/fleet/ceph_cluster.sh) for every
# scenario, so its startup is paid once per run.
flightrec_add_test(fleet_test
  SOURCES fleet_test_main.cc s3_client_test.cc shipper_test.cc recorderd_fleet_test.cc
          fleet_e2e_test.cc recorderd_fleet_faults_test.cc shipper_batch_test.cc
  DEPS flightrec_recorder_fleet flightrec_fleet_glue flightrec_fleet_pg fleet_pg_server
       flightrec_store flightrec_coredump flightrec_test_support flightrec_test_support_store
       nlohmann_json::nlohmann_json
  LABELS root
  TIMEOUT 600)
add_dependencies(fleet_test recorder recorderd recorder-coredump fr_crash)
# So the binary also finds tests/fleet/ceph_cluster.sh when run by hand.
target_compile_definitions(fleet_test PRIVATE FLIGHTREC_FLEET_SOURCE_DIR="${PROJECT_SOURCE_DIR}")

flightrec_add_test(fleet_retention_unittest
  SOURCES fleet_retention_unittest.cc
  DEPS flightrec_recorder_fleet flightrec_store flightrec_test_support flightrec_test_support_store)

# Fleet mode with its endpoint down (no gateway): the bound on what
# retention keeps unshipped, on a small tmpfs, with a real recorderd.
flightrec_add_test(fleet_stall_test
  SOURCES fleet_stall_test.cc
  DEPS flightrec_recorder_fleet flightrec_store flightrec_test_support
       flightrec_test_support_store nlohmann_json::nlohmann_json
  LABELS root
  TIMEOUT 300)
add_dependencies(fleet_stall_test recorder recorderd)

# The record cache against a hostile HTTP server on loopback and a cache
# directory another user owns (no gateway; root for chown).
flightrec_add_test(fleet_cache_test
  SOURCES fleet_cache_test.cc
  DEPS flightrec_fleet_glue flightrec_fleet_pg flightrec_recorder_fleet flightrec_test_support
  LABELS root
  TIMEOUT 120)
