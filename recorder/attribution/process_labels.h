// Where a process runs — its cgroup, systemd unit, container, pod and
// namespaces — read from /proc while it lives, so a record can name
// processes by service and container and not by bare pid.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "common/cgroup.h"
#include "recorder/model/events.h"

namespace flightrec::recorder::attribution {

struct ProcessLabels {
  cgroup::CgroupInfo cgroup;
  uint64_t pid_ns = 0;   // inode of /proc/PID/ns/pid, 0 unknown
  uint64_t user_ns = 0;  // inode of /proc/PID/ns/user, 0 unknown
  uint32_t ns_pid = 0;   // its pid in its own pid namespace (NSpid's last), 0 unknown
};

// Reads /proc/PID/{cgroup,status} and the ns links, each bounded; nullopt
// when the process is gone (or /proc hides it).
std::optional<ProcessLabels> ReadProcessLabels(uint32_t pid);

// "pid:[4026531836]" (what readlink gives for /proc/PID/ns/pid) -> 4026531836, else 0.
uint64_t NamespaceInode(std::string_view link);
// The last id of the NSpid line of a /proc/PID/status text, else 0.
uint32_t NamespacePid(std::string_view status);

// The labels as keys of a record's meta.processes entry (FORMAT.md); unknown
// ones are left out, so old readers and old records agree.
void AddLabelsToJson(const ProcessLabels& l, nlohmann::json* process);
// The inverse, from untrusted JSON: absent or mistyped keys read as unknown.
ProcessLabels LabelsFromJson(const nlohmann::json& process);

// The labels a record's meta.processes gives each pid; processes without
// any are left out.
std::unordered_map<uint32_t, ProcessLabels> LabelsByPid(const nlohmann::json& meta);

// The labels of the processes the sideband has named, kept as the kernel
// does: a forked child starts in its parent's cgroup and namespaces (copied,
// no /proc read), an exec re-reads them (a container engine moves its
// process before it execs the container's program), and an exited process
// keeps its last labels until Trim forgets it with the history window.
//
// Thread: the daemon's loop thread (or `recorder record`'s only thread).
class LabelCache {
 public:
  void Observe(const Event& e);
  // pid's labels for a record: read now while it runs (it may have been moved
  // since its exec), else the last known. nullopt when none are known.
  std::optional<ProcessLabels> Labels(uint32_t pid, bool exited);
  // Forgets processes that exited before cutoff_ns.
  void Trim(uint64_t cutoff_ns);
  size_t size() const { return procs_.size(); }

 private:
  struct Entry {
    ProcessLabels labels;
    bool exited = false;
    uint64_t exit_ns = 0;
  };
  std::unordered_map<uint32_t, Entry> procs_;
};

}  // namespace flightrec::recorder::attribution
