// OomWatch: every kill by the OOM killer, system-wide, with what the kernel
// knew when it chose the victim, so that the victim's death becomes a record
// of kind `oom` instead of `death` (docs/FORMAT.md, "Records of kind oom").
//
// Two kernel interfaces, each for what only it gives:
// * The `oom:mark_victim` tracepoint (include/trace/events/oom.h), through
//   perf on every CPU: it fires in __oom_kill_process() (mm/oom_kill.c) in
//   the context of the task whose allocation ran out of memory (the sample's
//   pid/tid: the trigger), with the victim's pid, comm, total_vm, anon/file/
//   shmem RSS and page tables (kB), uid and oom_score_adj. Offsets come from
//   its format file, each field's size checked.
// * The constraint (global, cpuset, memory policy, memcg) is in no
//   tracepoint: the kernel prints it only in dump_oom_victim()'s line
//   "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=...,cpuset=...,
//   mems_allowed=...,oom_memcg=...,task_memcg=...,task=COMM,pid=N,uid=N",
//   read from /dev/kmsg (kernel facility only: a write to /dev/kmsg never
//   has it). The line holds names others chose (cgroups, the comm), so only
//   the first field (a fixed vocabulary) and the last two (pid, uid, after
//   any comm) are trusted; oom_memcg is used only when it occurs once and
//   is the victim's memory cgroup or one of its ancestors. The line is
//   rate-limited by the kernel (oom_rs): without it the constraint is
//   "unknown", said so in the record.
//
// The memcg figures (limit, usage, peak, events) are read when the watch
// sees the kill, from cgroup v1's memory controller or v2's files.
//
// Thread: created and polled on the daemon's io thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/scoped_fd.h"
#include "common/status.h"
#include "recorder/daemon/tracepoint_format.h"

namespace flightrec::recorder {

// Where mark_victim's fields are in its raw record.
struct MarkVictimLayout {
  TracepointField pid, comm, total_vm, anon_rss, file_rss, shmem_rss, oom_score_adj;
  std::optional<TracepointField> uid, pgtables;
  size_t min_size = 0;  // a record shorter than this is refused
};
// Every field present with the size the kernel gives it (pid 4, comm a
// 4-byte __data_loc, figures 8, oom_score_adj 2, uid 4) at an offset below
// 64 KiB; otherwise an error naming the field.
StatusOr<MarkVictimLayout> ParseMarkVictimFormat(const std::string& format);

struct OomVictim {
  int32_t pid = 0;
  std::string comm;  // bytes, at most 16
  uint64_t total_vm_kb = 0, anon_rss_kb = 0, file_rss_kb = 0, shmem_rss_kb = 0;
  std::optional<uint64_t> pgtables_kb;
  int64_t uid = -1;
  int32_t oom_score_adj = 0;
  // The task the tracepoint fired in: the one whose allocation failed.
  int32_t trigger_pid = 0, trigger_tid = 0;
  std::string trigger_comm;
  int64_t trigger_uid = -1;
  uint64_t time_ns = 0;  // CLOCK_MONOTONIC
};
// One raw mark_victim record (PERF_SAMPLE_RAW's bytes): bounds-checked,
// an error naming what does not fit.
StatusOr<OomVictim> DecodeMarkVictim(const MarkVictimLayout& layout, std::string_view raw);

struct OomKmsgLine {
  std::string constraint;  // global, cpuset, memory_policy, memcg
  int32_t pid = 0;
  int64_t uid = -1;
  std::string oom_memcg;  // "" when absent or ambiguous
  bool memcg_ambiguous = false;
};
// One /dev/kmsg record ("PRI,SEQ,TS,FLAGS[,...];MESSAGE\n..."): nullopt for
// any other message; an error for an oom-kill line that is not the
// kernel's shape (a bad constraint, pid or uid).
StatusOr<std::optional<OomKmsgLine>> ParseOomKmsgRecord(std::string_view record);

// The mounted memory-controller hierarchies ("" when not mounted).
struct CgroupRoots {
  std::string v1_memory;  // e.g. /sys/fs/cgroup/memory
  std::string v2;         // a cgroup2 mount whose cgroup.controllers has memory
};
CgroupRoots FindCgroupRoots();

// A memory cgroup's figures. Limits of "max" (v2) or v1's unlimited value
// stay unset.
struct MemcgFigures {
  std::string version;  // "v1", "v2", "" unknown
  std::string path;     // in its hierarchy, "/" the root
  std::optional<uint64_t> limit_bytes, usage_bytes, peak_bytes, failcnt;
  std::map<std::string, uint64_t> events;  // v2 memory.events, v1 memory.oom_control
  std::string error;                       // why there are none
};
// The memory cgroup path of a /proc/PID/cgroup text: v1's memory line, else
// v2's "0::" line; nullopt when none (or a path with "." or ".." parts).
std::optional<std::string> MemoryCgroupOf(std::string_view proc_cgroup, bool v1);
// Reads `path`'s figures under roots (v1 when its memory controller is
// mounted, else v2). Files are read bounded and parsed strictly.
MemcgFigures ReadMemcgFigures(const CgroupRoots& roots, const std::string& path);

struct OomKill {
  OomVictim victim;
  std::optional<OomKmsgLine> kmsg;
  MemcgFigures memcg;
  std::string victim_cgroup;  // its memory cgroup, as /proc said at the kill
};
// Section `oom` of the record (docs/FORMAT.md) without the growth figures.
nlohmann::json OomJson(const OomKill& k);

class OomWatch {
 public:
  // Opens mark_victim on every CPU (an error without tracefs) and /dev/kmsg
  // (without it the constraint stays unknown, said in Status()).
  static StatusOr<std::unique_ptr<OomWatch>> Create();
  std::vector<int> fds() const;
  // Drains kmsg and the tracepoint rings; victims are kept until Take().
  void Poll();
  // The kill of `pid` seen by Poll() (removed), if any.
  std::optional<OomKill> Take(int32_t pid);
  nlohmann::json Status() const;

 private:
  OomWatch() = default;
  void OnVictim(std::string_view raw, int32_t pid, int32_t tid, uint64_t time_ns);
  void ReadKmsg();
  void AttachKmsg(OomKill* k);
  void ReadFigures(OomKill* k);

  MarkVictimLayout layout_;
  std::vector<TracepointRing> cpus_;
  ScopedFd kmsg_;
  std::string kmsg_unavailable_;
  CgroupRoots roots_;
  std::map<int32_t, OomKill> kills_;           // by victim pid, until its exit
  std::map<int32_t, OomKmsgLine> kmsg_lines_;  // by victim pid
  uint64_t victims_seen_ = 0, malformed_ = 0, kmsg_malformed_ = 0, dropped_ = 0, lost_ = 0;
  std::string last_error_;
};

}  // namespace flightrec::recorder
