// BlockedThreads: which threads are off CPU now, since when and in which
// state, from a log of context switches read as it is written (the perf
// backend's drained sched_switch log). It lets recorderd learn of a long
// block while the thread is still blocked (a `--blocked` hang trigger),
// without waiting for the thread to run again.
//
// Switches arrive per CPU, each CPU's in time order but the CPUs one after
// the other, so a thread's switch-in may be read before its earlier
// switch-out: a thread is blocked only while its last switch-out (in S or
// D) is newer than its last switch-in, whatever order they were read in.
//
// Thread: none of its own (the daemon's io thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace flightrec::recorder {

struct BlockedThread {
  uint32_t tid = 0;
  uint64_t since_ns = 0;  // its switch-out (CLOCK_MONOTONIC)
  char state = 'S';       // 'S' or 'D'
};

class BlockedThreads {
 public:
  // At most this many threads are tracked; past it the table starts over.
  static constexpr size_t kMaxThreads = 1u << 20;

  // One sched_switch at time_ns: prev_tid left the CPU in prev_state (the
  // tracepoint's TASK_REPORT bits), next_tid (0: the idle task) took it.
  void OnSwitch(uint64_t time_ns, uint32_t prev_tid, uint64_t prev_state, uint32_t next_tid);
  // Switches were lost: a thread whose switch-in was among them would look
  // blocked for ever, so everything is forgotten (complete from now on).
  void Reset() { threads_.clear(); }
  // Threads blocked at now_ns for at least min_ns, in a state of `states`
  // ("S", "D" or "DS").
  std::vector<BlockedThread> BlockedFor(uint64_t now_ns, int64_t min_ns, const char* states) const;
  // Forgets threads that are not blocked and have not switched for
  // keep_ns (the CPUs' logs are read within that of each other); walks the
  // table at most once per keep_ns.
  void Prune(uint64_t now_ns, uint64_t keep_ns);
  size_t size() const { return threads_.size(); }

 private:
  struct Entry {
    uint64_t out_ns = 0;
    uint64_t in_ns = 0;
    char state = 0;  // of the last switch-out; 0: runnable (preempted) or dead
  };
  Entry& At(uint32_t tid);
  std::unordered_map<uint32_t, Entry> threads_;
  uint64_t pruned_ns_ = 0;
};

}  // namespace flightrec::recorder
