# Fleet mode (docs/ARCHITECTURE.md, "Fleet mode"): the config, the S3 client
# (libcurl SigV4, OpenSSL digests) and the shipper.
pkg_check_modules(LIBCURL REQUIRED IMPORTED_TARGET libcurl)
pkg_check_modules(LIBCRYPTO REQUIRED IMPORTED_TARGET libcrypto)

flightrec_add_library(flightrec_recorder_fleet
  SOURCES fleet_config.cc s3_client.cc shipper.cc
  DEPS flightrec_common spdlog::spdlog PkgConfig::LIBCURL PkgConfig::LIBCRYPTO Threads::Threads)

flightrec_add_test(fleet_unittest
  SOURCES fleet_config_unittest.cc
  DEPS flightrec_recorder_fleet flightrec_test_support)
