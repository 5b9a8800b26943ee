// Hang triggers: "dump when a thread of this process has been blocked for
// N seconds" (`recorder trigger add --blocked`), and "dump when the kernel's
// hung-task detector reports one" (`--hung-task`). What a request asks for
// (HangSpec, checked field by field: a trigger request is a peer's input),
// which threads it selects (HangSelector: a process, an executable or a
// cgroup), and which blocks are new hangs (HangTracker: one dump per hang of
// a process, however long it lasts and however many of its threads it
// holds).
//
// Thread: the daemon's io thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "recorder/capture/blocked_threads.h"

namespace flightrec::recorder {

// Longest --blocked duration: a day (a longer one is a typo).
inline constexpr int64_t kMaxBlockedNs = 86'400'000'000'000;

// Which threads a hang trigger watches: those of one process, of processes
// running one executable, or of processes in one cgroup (its path, or a
// cgroup below it, or its systemd unit). Empty: every thread.
struct HangSelector {
  uint32_t pid = 0;
  std::string exe;
  std::string cgroup;
  bool empty() const { return pid == 0 && exe.empty() && cgroup.empty(); }
  // The thread's process id if the thread (read in /proc now) is selected.
  std::optional<uint32_t> Match(uint32_t tid) const;
};

struct HangSpec {
  enum class Kind { kBlocked, kHungTask };
  Kind kind = Kind::kBlocked;
  int64_t blocked_ns = 0;  // kBlocked
  std::string states = "D";
  HangSelector select;
  // "blocked 2.00 s in D, pid 42" / "hung task, exe /usr/bin/x"
  std::string Describe() const;
  nlohmann::json ToJson() const;
};

// The hang part of a trigger_add request: blocked_ns (1 ms .. 1 day) or
// hung_task (true), with state ("D", "S", "DS"), and at most one of pid,
// exe (an absolute path), cgroup. Any other shape is an error naming the
// field. A trigger on state S must select (most threads of a machine sleep
// in S for seconds).
StatusOr<HangSpec> ParseHangSpec(const nlohmann::json& params);

// One new hang: the first thread of its process seen blocked past the
// trigger's duration.
struct Hang {
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t since_ns = 0;
  char state = 'D';
};

class HangTracker {
 public:
  // At most this many blocked threads are remembered per trigger.
  static constexpr size_t kMaxSeen = 1u << 16;
  using Match = std::function<std::optional<uint32_t>(uint32_t tid)>;
  // `blocked`: the threads blocked past the trigger's duration now (each
  // block known by its since_ns). Each is matched once per block; a
  // process's hang is new unless another of its threads, matched earlier,
  // is still in the same block. complete: `blocked` lists every blocked
  // thread (those missing ran again and are forgotten).
  std::vector<Hang> Update(const std::vector<BlockedThread>& blocked, const Match& match,
                           bool complete);
  size_t seen() const { return seen_.size(); }

 private:
  struct Seen {
    uint64_t since_ns = 0;
    uint32_t pid = 0;  // 0: not selected
  };
  std::unordered_map<uint32_t, Seen> seen_;
};

// The thread's context switches so far (/proc/TID/status): what tells one
// hang reported by the kernel from the next (the count moves when it runs).
std::optional<uint64_t> ContextSwitches(uint32_t tid);

}  // namespace flightrec::recorder
