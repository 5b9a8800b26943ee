// DeathWatch: every process that dies from a signal, system-wide, with the
// signal, whether a core was dumped, who sent the signal and what the
// process was (its exe, cmdline, cgroup and uid, read while it lived).
//
// Two kernel interfaces made for this, each for what only it gives:
// * The process-events connector (NETLINK_CONNECTOR, CN_IDX_PROC,
//   drivers/connector/cn_proc.c): PROC_EVENT_EXIT carries the exit code with
//   the core-dumped bit (0x80, set by do_coredump in fs/coredump.c when the
//   dump succeeded), sent by proc_exit_connector() in do_exit
//   (kernel/exit.c) after exit_notify(); PROC_EVENT_EXEC/FORK/UID let the
//   metadata be read while /proc/PID still has it (at the exit event the mm,
//   and so cmdline and exe, are gone: exit_mm() runs earlier in do_exit).
//   It needs no tracefs, costs one small message per event, and a full
//   socket is reported (ENOBUFS) rather than silently dropped.
// * The `signal:signal_generate` tracepoint (include/trace/events/signal.h),
//   through perf (one event per CPU, a normal ring): it fires in
//   __send_signal_locked() in the sender's context, so the sample's pid/tid
//   is the sender; its fields give the signal, the si_code (SI_KERNEL for the
//   kernel's own SIGKILL: the OOM killer's __oom_kill_process sends
//   SEND_SIG_PRIV) and the target task. The connector never says who sent.
// `sched_process_exit` would also give exits but not the exit code's core
// bit before 6.x, and costs a tracepoint hit per thread exit; the connector
// gives both per exit with the code. `oom:mark_victim` only adds that the
// kernel's SIGKILL was the OOM killer's: SI_KERNEL already says "kernel".
//
// Thread: created and polled on the daemon's io thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/scoped_fd.h"
#include "common/status.h"

struct proc_event;  // linux/cn_proc.h

namespace flightrec::recorder {

// True for the signals whose default action dumps core (signal(7)): only
// their deaths may have gone to the core hook.
bool IsCoreSignal(int sig);

// What recorderd knew of a process while it lived (bytes as /proc gave
// them, each at most kMaxDeathText).
struct DeathProcessInfo {
  std::string exe, cmdline, cgroup, comm;
  int64_t uid = -1, gid = -1, ppid = -1;
  // "exec" (read at its exec), "fork" (its parent's, inherited at fork),
  // "scan" (read when recorderd started).
  std::string source;
};

struct DeathSender {
  bool known = false;
  // The kernel's own signal (si_code SI_KERNEL or a positive si_code: the
  // OOM killer, a fault, a CPU limit): the task it ran in is `pid`.
  bool kernel = false;
  int32_t code = 0;  // si_code
  int signal = 0;
  int32_t target_tgid = 0;  // the target's process when the sender is that thread (0: unknown)
  int32_t pid = 0, tid = 0;
  int64_t uid = -1;  // -1: the sender was gone before it could be read
  std::string comm;
  uint64_t time_ns = 0;  // CLOCK_MONOTONIC
};

struct Death {
  int32_t pid = 0;
  int signal = 0;
  bool core_dumped = false;  // the exit code's 0x80
  uint32_t exit_code = 0;
  uint64_t time_ns = 0;             // CLOCK_MONOTONIC, the leader's exit
  std::vector<int32_t> other_tids;  // its other threads' exits seen in the same batch
  std::optional<DeathProcessInfo> info;
  DeathSender sender;
};

inline constexpr size_t kMaxDeathText = 4096;

class DeathWatch {
 public:
  // Subscribes to the connector (root: CAP_NET_ADMIN) and opens the
  // tracepoint on every online CPU (without tracefs the senders stay
  // unknown, with the reason in Status()); reads every process's metadata.
  static StatusOr<std::unique_ptr<DeathWatch>> Create();
  ~DeathWatch();
  // Pollable: the connector socket and each CPU's tracepoint ring.
  std::vector<int> fds() const;
  // Everything pending: senders first (a signal is generated before the
  // exit it causes), then the connector's messages; the deaths found.
  std::vector<Death> Poll();
  nlohmann::json Status() const;

 private:
  struct Cpu {
    ScopedFd fd;
    ScopedMmap ring;
  };
  struct Fields {
    size_t sig = 0, code = 0, pid = 0, size = 0;
  };
  DeathWatch() = default;
  void OpenTracepoint();
  void DrainSenders();
  void OnSignal(const std::vector<uint8_t>& body);
  void ReadConnector(std::vector<Death>* deaths, std::map<int32_t, int32_t>* tgid_of);
  void OnEvent(const ::proc_event& ev, std::vector<Death>* deaths,
               std::map<int32_t, int32_t>* tgid_of);
  void Remember(int32_t pid, DeathProcessInfo info);
  void ScanProc();

  ScopedFd nl_;
  std::vector<Cpu> cpus_;
  Fields fields_;
  std::string sender_unavailable_;
  // Fatal-looking signals by target task (tid), newest kept, pruned by age.
  std::map<int32_t, DeathSender> senders_;
  std::map<int32_t, DeathProcessInfo> infos_;  // by tgid
  uint64_t connector_overruns_ = 0;
  uint64_t signal_records_lost_ = 0;
  uint64_t senders_dropped_ = 0;
  uint64_t infos_dropped_ = 0;
  uint64_t exits_seen_ = 0;
};

}  // namespace flightrec::recorder
