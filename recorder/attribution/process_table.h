// The processes, threads and mappings the sideband has described so far.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "recorder/attribution/cookie_table.h"
#include "recorder/model/events.h"

namespace flightrec::recorder::attribution {

struct Mapping {
  uint64_t start = 0;
  uint64_t end = 0;
  uint64_t pgoff = 0;
  uint32_t cookie = 0;  // 0 = anonymous / special ([heap], [stack], //anon)
  bool exec = false;
  std::string name;  // for special mappings like [vdso]
};

// A thread other than the main one: its own name (pthread_setname_np,
// PR_SET_NAME) is what its samples show, not the process's.
struct Thread {
  std::string comm;
  bool exited = false;
  uint64_t exit_time_ns = 0;
};

struct Process {
  uint32_t pid = 0;
  std::string comm;                    // the main thread's (tid == pid) name
  std::map<uint32_t, Thread> threads;  // by tid, the other threads
  std::string exe;                     // path of the first executable mapping after exec
  bool exited = false;
  uint64_t exit_time_ns = 0;
  std::map<uint64_t, Mapping> maps;  // by start address
};

// Applies sideband events. perf never reports munmap, so a mapping lives
// until an overlapping mmap replaces it, an exec clears the address space, or
// the process exits — exited processes stay until Prune, so samples inside
// the history window still attribute (the dlopen/dlclose/exit case).
class ProcessTable {
 public:
  explicit ProcessTable(CookieTable* cookies) : cookies_(cookies) {}
  const CookieTable& cookies() const { return *cookies_; }
  void Apply(const Event& e);
  const Process* Find(uint32_t pid) const;
  // The name thread tid of process pid has now (comm events are applied in
  // time order, so a thread renamed later keeps its old name for the samples
  // before): its own, else the process's, else "". The idle task (pid 0,
  // tid 0 on every CPU), which no /proc entry or comm event names, is
  // kIdleComm, as perf names it.
  const std::string& ThreadComm(uint32_t pid, uint32_t tid) const;
  static constexpr const char* kIdleComm = "swapper";
  // The thread a sample of (pid, tid) at time_ns belongs to, and its name.
  // A sample the kernel takes on a thread's way out, after its pid was
  // detached (release_task -> __exit_signal -> detach_pid), carries tid -1
  // (and pid -1 for a process's last thread): perf_event_pid_type() in
  // kernel/events/core.c returns -1 for a task whose pid is no longer
  // alive. Its exit event came just before (perf_event_exit_task runs in
  // do_exit before exit_notify), so such a sample belongs to the thread of
  // pid that exited last, at most kExitTailNs earlier; when none did, it
  // is named kExitingComm and keeps tid -1.
  struct SampledThread {
    uint32_t tid;
    const std::string* comm;
  };
  SampledThread ThreadAt(uint32_t pid, uint32_t tid, uint64_t time_ns) const;
  static constexpr uint64_t kExitTailNs = 1'000'000'000;
  static constexpr const char* kExitingComm = "[exiting]";
  // Mapping containing ip in pid's address space, or nullptr.
  const Mapping* Lookup(uint32_t pid, uint64_t ip) const;
  // Drops processes (and threads) that exited before cutoff_ns.
  void Prune(uint64_t cutoff_ns);
  size_t size() const { return procs_.size(); }
  // Changes with every Apply and Prune, and is never the same for two
  // states of any two tables of the program: a consumer that derived
  // something from the table may keep it while this is unchanged.
  uint64_t generation() const { return generation_; }
  // Re-creates the events that rebuild pid's current state (for records):
  // its exec, its mappings, then each live thread's name.
  std::vector<Event> StateEvents(uint32_t pid, uint64_t time_ns) const;

 private:
  Process& Get(uint32_t pid);
  CookieTable* cookies_;
  uint64_t generation_ = NextGeneration();
  static uint64_t NextGeneration();
  std::unordered_map<uint32_t, Process> procs_;
  std::unordered_map<uint32_t, uint32_t> tid_to_pid_;
  std::unordered_map<uint32_t, std::vector<MmapEvent>> mmaps_;  // per pid, for StateEvents
};

}  // namespace flightrec::recorder::attribution
