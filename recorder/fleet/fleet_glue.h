// Where fleet mode's halves meet (docs/ARCHITECTURE.md, "Fleet mode"): the
// shipper (S3) confirms an object, then its rows go into the PostgreSQL
// index; the CLI finds a record in the index, then fetches its object from
// S3 into the record cache.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "recorder/fleet/fleet_config.h"
#include "recorder/fleet/record_cache.h"
#include "recorder/fleet/s3_client.h"
#include "recorder/fleet/shipper.h"

namespace flightrec::fleet {

// The shipper's on_uploaded for `recorderd --fleet`: indexes each confirmed
// object in PostgreSQL (IndexShippedRecord, idempotent). The connection is
// opened, and the schema migrated, on the shipper's thread at its first
// call and again after any failure to do so, so that PostgreSQL being down
// when recorderd starts delays the index, never recording: the error goes
// back to the shipper, which retries with backoff and does not journal the
// record as confirmed until its row exists. Call it from one thread only
// (the shipper's).
std::function<Status(const UploadedRecord&)> MakeIndexingCallback(const FleetConfig& config,
                                                                  const std::string& host_id);

// The same for the shipper's on_uploaded_batch: a batch's rows in one
// transaction (IndexShippedRecords), what recorderd --fleet uses.
std::function<Status(const std::vector<UploadedRecord>&)> MakeBatchIndexingCallback(
    const FleetConfig& config, const std::string& host_id);

// The record cache's fetcher over the S3 client: the object is downloaded
// (checked against its x-amz-meta-sha256 by S3Client::GetToFile) into a
// scratch file in `scratch_dir`, then copied into the cache's file, which
// RecordCache checks again against the index's checksum.
class S3ObjectFetcher : public ObjectFetcher {
 public:
  static StatusOr<std::unique_ptr<S3ObjectFetcher>> Create(const FleetConfig& config,
                                                           std::string scratch_dir);
  Status Fetch(const std::string& key, int fd, uint64_t max_bytes) override;

 private:
  S3ObjectFetcher(std::unique_ptr<S3Client> s3, std::string scratch_dir)
      : s3_(std::move(s3)), scratch_dir_(std::move(scratch_dir)) {}
  std::unique_ptr<S3Client> s3_;
  std::string scratch_dir_;
};

}  // namespace flightrec::fleet
