// The crash as the hook sees it (systemd-coredump's coredump-context): the
// kernel's values, what /proc says about the process, and the notes every
// stage adds. RunHook fills one Crash stage by stage.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "coredump-hook/coredump.h"

namespace flightrec::coredump {

// A file as the kernel knows it. Unlike a path, a user cannot make one
// file's pair equal another's (a bind mount in a mount namespace of their
// own shows any file under any path, the hook's included).
struct FileId {
  dev_t dev = 0;
  ino_t ino = 0;
  bool operator==(const FileId&) const = default;
};

struct Crash {
  HookArgs a;           // the kernel's values; comm replaced by /proc's when verified
  std::string signame;  // "SIGSEGV", or the number
  nlohmann::json md;    // ReadMetadata's answer
  std::string maps;     // /proc/PID/maps text, "" when not verified
  std::string exe;      // the executable's path; empty when /proc had none (never the comm)
  std::optional<FileId> exe_id;        // the executable itself, when /proc was verified
  std::map<pid_t, pid_t> global_tids;  // core (namespace) tid -> initial namespace tid
  std::vector<std::string> notes;      // why anything is missing, in order
  // Filled by the later stages.
  bool limited = false;  // rate limited: metadata only
  std::string history_id, history_file;
  uint64_t core_size = 0;
  bool truncated = false;
  std::string compression;   // how the core was compressed (CompressionGovernor)
  nlohmann::json backtrace;  // null when there is none
};

// The hook has no terminal: its messages go to the kernel log (where
// `dmesg`/journald show them) and to stderr for tests. Control bytes in
// `raw` (the crashing program's name) are escaped. `level` is the kernel
// log's: 5 (notice) for what a crash did, 7 (debug) for what only a
// developer wants.
void Log(const std::string& raw, int level = 5);

// At most `max` bytes of a file.
std::string ReadText(const std::string& path, size_t max = 4 << 20);

// What /proc says about the crashing process, read while it still exists, or
// {verified: false} with the reason in *notes when /proc/PID is (or may be)
// another process.
// *exe_id gets the executable's device and inode when it could be opened.
nlohmann::json ReadMetadata(const HookArgs& a, std::string* maps, std::vector<std::string>* notes,
                            std::optional<FileId>* exe_id);

// Stage 1 (privileged: another user's /proc): a Crash from the kernel's
// values and /proc.
Crash CollectCrash(const HookArgs& kernel_args);

// A crash of the hook must not start the hook again: true when `exe` is the
// file this process runs.
bool IsHookItself(const std::optional<FileId>& exe);

}  // namespace flightrec::coredump
