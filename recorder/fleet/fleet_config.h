// Fleet mode configuration: what `recorderd --fleet CONFIG` and
// `recorder --fleet CONFIG ...` read.  The file is systemd-style INI
// (like coredump.conf); secrets live only in CredentialsFile=, a file that
// must be owned by root and not readable by group/other (refused otherwise),
// and are never logged or put on a command line.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "common/status.h"

namespace flightrec::fleet {

struct FleetConfig {
  std::string host_id;                    // [Fleet] HostId= (default: /etc/machine-id)
  std::string s3_endpoint;                // [S3] Endpoint= e.g. http://127.0.0.1:7480
  std::string s3_bucket;                  // [S3] Bucket=
  std::string s3_region = "us-east-1";    // [S3] Region=
  std::string s3_access_key;              // CredentialsFile: S3AccessKey=
  std::string s3_secret_key;              // CredentialsFile: S3SecretKey=
  std::string pg_conninfo;                // [PostgreSQL] ConnInfo= (libpq keywords, no password)
  std::string pg_password;                // CredentialsFile: PostgresPassword=
  uint64_t max_upload_bytes_per_sec = 0;  // [Fleet] MaxUploadRate= bytes/s, 0 = unlimited
  std::filesystem::path cache_dir;        // [Fleet] CacheDir= records fetched from the fleet
  // [Fleet] CacheMaxUse=: their total, the least recently used removed
  // first; systemd-coredump's 4 GiB cap on its store by default.
  uint64_t cache_max_bytes = 4ull << 30;
  // [Fleet] RetryMaxDelay=: the shipper's backoff doubles from 0.5 s up to
  // this while the gateway or the index is away, so this is also how late
  // shipping resumes after they come back.
  int64_t retry_max_delay_ms = 60'000;
  // [S3] Timeout=: a request that connects in no more than this and then
  // moves at least 1 KiB/s for this long; a partitioned or hung gateway is
  // given up on (and retried) after it.
  int64_t s3_timeout_s = 30;
};

// Reads CONFIG and the CredentialsFile= it names.  Errors name the file and
// line; a secret's value never appears in an error.
StatusOr<FleetConfig> LoadFleetConfig(const std::filesystem::path& path);

}  // namespace flightrec::fleet
