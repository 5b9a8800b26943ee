// The names of record kinds and sections: part of the record format
// (docs/FORMAT.md), written by the daemon and the coredump hook, read by every
// query command. One place, so writer and reader cannot drift.
#pragma once

namespace flightrec::recorder {

// Record kinds (store::Store::BeginRecord).
inline constexpr const char* kKindDump = "dump";
inline constexpr const char* kKindCrash = "crash";
// A kernel panic's history, kept across the reboot by flightrec.ko and stored
// by recorderd at the next start (a dump record plus section `panic`).
inline constexpr const char* kKindPanic = "panic";
// A process killed by a signal without a crash record (SIGKILL, a core the
// hook never got): a dump record of its history plus a crash's metadata.
inline constexpr const char* kKindDeath = "death";
// A death by the OOM killer: a death record plus sections `oom` and
// `mem_growth` (recorder/record/mem_growth_section.h).
inline constexpr const char* kKindOom = "oom";

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

}  // namespace flightrec::recorder
