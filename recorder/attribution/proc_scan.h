// The processes that exist now, read from /proc, as sideband events.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "recorder/model/events.h"

namespace flightrec::recorder::attribution {

// Events describing the processes that exist now, read from /proc (a scan at
// start fills the table for processes that started before the daemon).
// Tolerates processes vanishing mid-scan.
std::vector<Event> ScanProc(uint64_t time_ns);
// The executable mappings in a /proc/PID/maps text, as mmap events.
std::vector<MmapEvent> MapsEvents(uint32_t pid, const std::string& maps, uint64_t time_ns);

}  // namespace flightrec::recorder::attribution
