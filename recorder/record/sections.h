// The names of sections (record kinds: record_kind.h): part of the record format
// (docs/FORMAT.md), written by the daemon and the coredump hook, read by every
// query command. One place, so writer and reader cannot drift.
#pragma once

#include "recorder/record/record_kind.h"

namespace flightrec::recorder {

// A dump record (recorder/record/dump_record.h); the crash record's sections
// are named in recorder/record/crash_record.h.
inline constexpr const char* kSectionEvents = "events";
inline constexpr const char* kSectionKallsyms = "kallsyms";
inline constexpr const char* kSectionKernelNames = "kernel_names";
inline constexpr const char* kSectionVdso = "vdso";
inline constexpr const char* kSectionConfig = "config";
inline constexpr const char* kSectionLoss = "loss";
inline constexpr const char* kSectionLiveAttribution = "live_attribution";
inline constexpr const char* kSectionPanic = "panic";
// The meta object of a panic record (the panic's summary).
inline constexpr const char* kMetaPanic = "panic";

}  // namespace flightrec::recorder
