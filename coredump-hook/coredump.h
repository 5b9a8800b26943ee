// recorder-coredump: the kernel.core_pattern pipe handler. The kernel runs it
// as root in the initial namespaces with the core on stdin and the crashing
// process still present (core_pipe_limit > 0). It
//   1. reads the process's metadata from /proc (checked to still be the same
//      process: pidfd, start time before and after),
//   2. asks recorderd for the process's last seconds (a linked `dump` record;
//      from the module's crash marker when recorderd runs the module backend),
//   3. streams the core into a `crash` record (zstd, bounded memory, size limit,
//      truncation flagged),
//   4. unwinds every thread from the core with libunwind's coredump API in a
//      child process running as the crashed user (never root) under CPU, memory
//      and output limits and a seccomp filter, and symbolizes the frames with
//      the attribution pipeline (the child is piped the core and keeps a
//      reduced copy of it: CoreReducer; no byte of the core is parsed
//      outside it),
// and commits the record. Any step that fails is recorded as a reason; the
// core is stored whatever happens to the others, and the rest of the crash
// whatever happens to the core (a full store keeps it without the core).
//
// Privileges: step 1 (another user's /proc entries), creating the unwinder's
// temporary file and starting the unwinder as another user are the only
// steps that need root's capabilities. The hook does them first and then
// drops every capability but CAP_KILL (DropPrivileges): it stays uid 0 only
// because the store and its index are root's files, which an owner writes
// without capabilities.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "coredump-hook/core_compression.h"

namespace flightrec::coredump {

// The core_pattern specifiers, in the order `recorder coredump install` puts
// them after "--": %P %i %I %s %t %c %u %g %d %e %F. %F (Linux >= 6.16) expands to the
// number of a pidfd of the crashing process that the kernel installs in the
// hook (3); older kernels drop it, leaving an empty or no 11th value.
struct HookArgs {
  pid_t pid = 0;             // %P: pid in the initial pid namespace
  pid_t tid = 0;             // %i: crashing thread, in the process's namespace
  pid_t global_tid = 0;      // %I: crashing thread, initial namespace
  int signal = 0;            // %s
  int64_t time_s = 0;        // %t
  uint64_t rlimit_core = 0;  // %c (RLIMIT_CORE soft limit)
  uid_t uid = 0;             // %u
  gid_t gid = 0;             // %g
  bool dumpable = true;      // %d: 0 for setuid & co: root-only
  std::string comm;          // %e (the kernel's; /proc's replaces it when verified)
  int pidfd = -1;            // %F: the kernel's pidfd of the process, -1 if none
};

StatusOr<HookArgs> ParseHookArgs(const std::vector<std::string>& positional);

// The hook's argv split into its own options and the kernel's values. A
// pattern without options starts with the values (argv[1] is %P, a number)
// and is values only, read by position; otherwise the values follow the
// first "--" (the pattern `recorder coredump install` writes, whose options
// before it are root's). Nothing after "--", nor anything of a pattern that
// starts with a number, is ever an option: %e is the crashing program's to
// choose.
struct HookArgv {
  std::vector<std::string> options;
  std::vector<std::string> values;
};
HookArgv SplitHookArgv(int argc, const char* const* argv);

struct HookOptions {
  std::string store_dir;
  std::string socket_path = "/run/flightrec/control.sock";
  uint64_t max_core_bytes = 32ull << 30;  // like systemd's ProcessSizeMax on 64-bit
  int64_t history_ns = 5'000'000'000;
  int history_timeout_ms = 3000;  // connect + dump; the core waits meanwhile
  // Cores stored per hour (excess crashes keep metadata only): per crashed
  // uid, per executable of that uid, and for everyone.
  int max_per_uid_per_hour = 30;
  int max_per_exe_per_hour = 20;
  int max_per_hour = 200;
  // The unwinder's reduced copy of the core (CoreReducer): notes, then at
  // most this much memory (stacks first), so a core of any size gets a
  // backtrace and each running hook puts at most notes + this in /var/tmp.
  uint64_t backtrace_memory_max = 48ull << 20;
  // zstd level and workers for the core, adapted to the CPU the hook gets.
  CoreCompressionOptions compression;
};

// Runs the hook on stdin; returns the process exit code (0 unless nothing at
// all could be stored).
int RunHook(const HookArgs& args, const HookOptions& opts, int core_fd);

int CoredumpMain(int argc, char** argv);

// The kernel cuts core_pattern at 127 bytes, so the pattern holds only the
// hook's path and the specifiers; where to store and which daemon to ask
// come from this file, written by `recorder coredump install`.
inline constexpr const char* kHookConfig = "/etc/flightrec/coredump.json";

// The pattern `recorder coredump install` writes (InvalidArgument if the
// kernel would truncate it).
StatusOr<std::string> CorePattern(const std::string& hook_path);
Status WriteHookConfig(const HookOptions& o);

// Unwinds every thread of the core in `core_path` with libunwind's coredump
// accessors, using `maps` (the process's /proc/PID/maps) for backing files,
// and symbolizes the frames. Crashing thread first. A core names threads by
// their ids in the process's own pid namespace; `global_tids` maps them to
// the initial namespace's (those of samples and of %I), and each thread is
// reported by its global tid ("tid") and its core tid ("ns_tid").
// `crashing_tid` is %I. Runs in the calling process: RunHook calls it from a
// sandboxed child.
nlohmann::json Backtrace(const std::string& core_path, const std::string& maps, pid_t pid,
                         pid_t crashing_tid, const std::map<pid_t, pid_t>& global_tids,
                         size_t max_frames = 64);

// Confines the calling process (the unwinder child, after it became the
// crashed user with no_new_privs) to reading files and memory, writing to
// its open fds, allocating and exiting: any other system call (socket,
// execve, fork, kill, ptrace, ...) kills it with SIGSYS.
Status UnwinderSeccomp();

// Leaves the calling process with CAP_KILL only (permitted and effective;
// nothing inheritable, ambient or in the bounding set), root's exec
// privileges and ambient raising locked off (securebits) and no_new_privs.
// Needs CAP_SETPCAP.
Status DropPrivileges();

}  // namespace flightrec::coredump
