// Who waited for whom: the wait-for graph of a process's blocked threads
// (each waits for at most one mutex, whose owner is one thread) and its
// cycles, the deadlocks. Pure logic on a record's lock_waits entries, which
// are hostile input: any owner data (self-waits, owners that wait for
// others, long chains, duplicates) gives an answer in O(n), never a loop.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace flightrec::recorder::analysis {

struct LockEdge {
  uint32_t tid = 0;    // the waiting thread
  uint64_t mutex = 0;  // the futex word's address
  uint32_t owner = 0;  // 0: the mutex named no owner
  bool owner_in_process = false;
};

// Deadlocks reported, and hops shown in one's text, at most.
inline constexpr size_t kMaxDeadlocks = 64;
inline constexpr size_t kMaxCycleText = 16;

// {"waits": [{tid, mutex ("0x..."), owner, owner_comm, owner_in_process}],
//  "deadlocks": [{"threads": [tid, ...], "text": "deadlock: T1 waits for
//  T2 (mutex 0x...), T2 waits for T1 (mutex 0x...)"}], "deadlocks_omitted"}.
// One edge per tid (the first); comm names threads where known.
nlohmann::json LockGraph(const std::vector<LockEdge>& edges,
                         const std::map<uint32_t, std::string>& comm);

}  // namespace flightrec::recorder::analysis
