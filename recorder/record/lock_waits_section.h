// Section `lock_waits` of a dump record (docs/FORMAT.md, "Lock owners"): the
// glibc mutexes blocked threads of the record's processes waited for, and
// each one's owner, as recorderd read them from the live process
// (recorder/capture/lock_waits.h). Records are hostile input: decoding
// bounds the count and refuses entries whose fields are out of range,
// naming the entry; the wait-for graph built on them (analysis/lock_graph.h)
// copes with any owner data, cycles included.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "store/record_file.h"

namespace flightrec::recorder {

inline constexpr const char* kSectionLockWaits = "lock_waits";
// Entries a record may hold (recorderd remembers at most 65536 threads).
inline constexpr size_t kMaxRecordedLockWaits = 65536;
// PID_MAX_LIMIT (include/linux/threads.h): no tid is larger.
inline constexpr uint32_t kMaxTid = 4u << 20;

// The writer's side: the entries of `pids`.
nlohmann::json LockWaitsOf(const nlohmann::json& waits, const std::set<uint32_t>& pids);

struct RecordedLockWait {
  uint32_t pid = 0, tid = 0, owner = 0;  // owner 0: the mutex named none
  uint64_t out_ns = 0, end_ns = 0, mutex = 0;
  bool owner_in_process = false;
};
// Decodes the section's bytes; an absent section is an empty list.
StatusOr<std::vector<RecordedLockWait>> DecodeLockWaits(std::string_view bytes,
                                                        const std::string& what);
StatusOr<std::vector<RecordedLockWait>> LoadLockWaits(const store::RecordReader& reader);

}  // namespace flightrec::recorder
