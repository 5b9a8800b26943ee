// recorder --fleet CONFIG ...: fleet queries (fleet_commands.cc).
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "store/record_file.h"

namespace flightrec::recorder::cli {

// argv's command (its first word that is not an option or an option's
// value) reads one record: report, timeline, script, export, flamegraph.
// With --fleet, RecorderMain runs those commands as usual, on the record
// OpenFleetRecord fetches, instead of handing argv to FleetMain.
bool IsRecordCommand(int argc, char** argv);

// The record `id` (ID, HOST/ID or a unique prefix) of the fleet named by
// `config`: found in the PostgreSQL index, fetched from S3 into the record
// cache ([Fleet] CacheDir=) unless a cached copy has the index's size and
// SHA-256, and opened from there.
StatusOr<std::unique_ptr<store::RecordReader>> OpenFleetRecord(const std::string& config,
                                                               const std::string& id);

// argv has --fleet (before any "--"): RecorderMain hands it to FleetMain.
bool WantsFleet(int argc, char** argv);
int FleetMain(int argc, char** argv);

}  // namespace flightrec::recorder::cli
