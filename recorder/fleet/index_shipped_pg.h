// From a shipped record to its rows in the fleet index: what the shipper's
// on_uploaded callback calls once the object is confirmed in the bucket.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "recorder/fleet/fleet_index.h"

namespace flightrec::fleet {

struct ShippedRecord {
  std::string host_id;
  std::string record_id;
  std::string object_key;
  std::string sha256;  // of the object's bytes (the record file)
  uint64_t bytes = 0;
  std::string record_path;  // the local record file, still there
};

// Reads the record's header (kind, time) and, for a crash, its crash
// sections (crash_signature.h), and adds its rows. Returns what
// FleetIndex::AddRecord returns (false: it was indexed before: a retry).
// A crash whose sections are unreadable is still indexed, with the
// program's signature; a file that is not a record is an error.
StatusOr<bool> IndexShippedRecord(FleetIndex& index, const ShippedRecord& shipped);
// A batch in one transaction (FleetIndex::AddRecords): all or nothing.
StatusOr<std::vector<bool>> IndexShippedRecords(FleetIndex& index,
                                                const std::vector<ShippedRecord>& shipped);

}  // namespace flightrec::fleet
