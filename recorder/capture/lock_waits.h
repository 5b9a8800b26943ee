// Lock owners of blocked threads: which thread held the glibc mutex a
// blocked thread was waiting for. The perf backend feeds it every blocking
// switch-out with the user's first syscall argument (rdi: a futex wait's
// futex address, from PERF_SAMPLE_REGS_USER) and every switch-in; once a wait
// has lasted kLockReadAfterNs, the mutex around that address is read from
// the live process's memory (/proc/PID/mem, 24 bytes) and kept only if it is
// one (docs/ARCHITECTURE.md, "Lock owners"). Reading while the process lives
// is what makes a SIGKILL's owners knowable: at its death the memory is gone.
//
// Thread: none of its own (the daemon's io thread drives the backend).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace flightrec::recorder {

// A wait is read once it has lasted this long: the daemon drains the log
// every 200 ms, so reads land 250-450 ms into a wait.
inline constexpr int64_t kLockReadAfterNs = 250'000'000;
// Reads per drain, and threads remembered (the oldest ended waits go first).
inline constexpr size_t kMaxLockReadsPerDrain = 64;
inline constexpr size_t kMaxLockWaits = 65536;

// glibc's struct __pthread_mutex_s on x86-64 (sysdeps/nptl/bits/
// struct_mutex.h): __lock, __count, __owner, __nusers, __kind.
struct MutexWords {
  int32_t lock = 0;
  uint32_t count = 0;
  int32_t owner = 0;
  uint32_t nusers = 0;
  int32_t kind = 0;
};
// The owner tid a glibc mutex names (0: none), or -1 if these words are not a
// locked glibc mutex: a kind with unknown bits, a normal mutex's word not 1
// or 2 (locked, with waiters), a robust/PI one's word without an owner tid.
int64_t MutexOwner(const MutexWords& w);

struct LockWait {
  uint32_t pid = 0, tid = 0;
  uint64_t out_ns = 0;  // the blocking switch-out
  uint64_t end_ns = 0;  // its switch-in (0: not seen yet)
  uint64_t uaddr = 0;   // the futex word: the mutex's __lock
  bool read = false;
  uint64_t read_ns = 0;
  MutexWords words;
  uint32_t owner = 0;
  bool owner_in_process = false;  // the owner is a thread of pid
};

class LockWaitTable {
 public:
  // Reads n bytes at addr of pid's memory.
  using MemReader = std::function<Status(uint32_t pid, uint64_t addr, void* buf, size_t n)>;
  // Whether tid is a thread of pid now.
  using ThreadOf = std::function<bool(uint32_t pid, uint32_t tid)>;

  void Blocked(uint32_t pid, uint32_t tid, uint64_t out_ns, uint64_t uaddr);
  void Ran(uint32_t tid, uint64_t in_ns);
  // Reads the mutex of each wait that has lasted kLockReadAfterNs by now_ns
  // and is not read yet, at most kMaxLockReadsPerDrain; returns the reads.
  size_t Resolve(uint64_t now_ns, const MemReader& read, const ThreadOf& thread_of);
  // The read waits of `pids` (all if empty) that had not ended before
  // since_ns: section `lock_waits` (docs/FORMAT.md).
  nlohmann::json ToJson(const std::set<uint32_t>& pids, uint64_t since_ns) const;
  nlohmann::json Stats() const;
  size_t size() const { return waits_.size(); }

 private:
  void EvictSome();
  std::unordered_map<uint32_t, LockWait> waits_;  // by tid: its latest wait
  uint64_t reads_ = 0, not_mutex_ = 0, read_failed_ = 0, evicted_ = 0, capped_ = 0;
};

// MemReader on /proc/PID/mem; ThreadOf on /proc/PID/task/TID.
Status ReadProcMem(uint32_t pid, uint64_t addr, void* buf, size_t n);
bool IsThreadOf(uint32_t pid, uint32_t tid);

}  // namespace flightrec::recorder
