// What a `death` record holds besides its history (docs/FORMAT.md, "Records
// of kind death"): the index metadata's `crash` object, in the crash
// record's schema where it applies, and the `metadata` section.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "recorder/daemon/death_watch.h"

namespace flightrec::recorder {

// "SIGKILL" (or the number when the signal has no name).
std::string SignalName(int sig);

// meta.crash: pid, signal, exe, uid, time, core_stored false, the sender.
// `mono_to_wall_ns` turns the death's CLOCK_MONOTONIC time into wall time.
nlohmann::json DeathCrashMeta(const Death& d, int64_t mono_to_wall_ns);

// Section `metadata`: what recorderd read of the process while it lived
// (exe, build_id, cmdline, cgroup, status), and what it could not know.
nlohmann::json DeathMetadata(const Death& d, const std::string& build_id);

// One line for the log and the record's reason: names as the processes'
// bytes (bounded), to be escaped by whoever prints it.
std::string DeathReason(const Death& d);

}  // namespace flightrec::recorder
