// The pieces of `recorder crash` shared by its command files (crash_list.cc,
// crash_info.cc, crash_core.cc, crash_debug.cc; registered in
// crash_commands.cc): who may see which crash, and how one is found.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "recorder/cli/cli.h"
#include "recorder/cli/label_filter.h"
#include "store/store.h"

namespace flightrec::recorder::cli {

// Crashes a user may see: root sees all; others see their own processes'
// crashes, and never those of non-dumpable processes (setuid & co).
std::optional<uint32_t> VisibleUid();
Status CheckAccess(const nlohmann::json& meta);

// A crash as the list and lookups see it, from the index (root) or, for
// other users who cannot read the index, from the record files they are
// allowed to open (the hook grants the crashed user read access by ACL).
struct CrashRow {
  std::string id;
  int64_t created_ns = 0;
  uint64_t file_size = 0;
  nlohmann::json meta;
  std::string kind = "crash";  // or "death", or "panic": a kernel panic's record (root only)
};

StatusOr<std::vector<CrashRow>> ListCrashes(const CliContext& ctx, const store::ListQuery& q);
// The crash for an id, any unique part of one, or -1, with its reader.
StatusOr<std::pair<CrashRow, std::unique_ptr<store::RecordReader>>> OpenCrash(
    const CliContext& ctx, const std::string& id);
// The history record linked to a crash (root: through the store; others:
// the file the hook made readable to them).
StatusOr<std::unique_ptr<store::RecordReader>> OpenHistory(const CliContext& ctx,
                                                           const std::string& hid);

struct CrashListArgs {
  bool newest = false;
  bool json = false;
  std::string since;
  int64_t pid = -1;
  std::string exe;
  LabelFilter labels;  // of the crashed (or killed) process
};
Status RunCrashList(const CliContext& ctx, const CrashListArgs& a);
Status PrintCrashList(const std::vector<CrashRow>& rows, bool as_json);

struct CrashInfoArgs {
  std::string id;
  bool json = false;
  bool maps = false;
  int bins = 20;
};
Status RunCrashInfo(const CliContext& ctx, const CrashInfoArgs& args);

// The crash's executable as `crash list` and `crash info` show it (to be
// escaped): its path, or, when the record has no absolute one (a path
// deeper than PATH_MAX; a record whose exe is the comm), the comm labelled
// as such.
std::string ExecutableForDisplay(const nlohmann::json& crash);

// gdb's argv for `crash debug`: `extra` (the -A arguments of the person
// running it), the core as `--core=`, then `--` and the executable only if
// it is an absolute path. A record's exe is its crashed user's text: among
// gdb's options, a comm like `-ex=!cmd` would run cmd as the caller.
std::vector<std::string> GdbArgv(const std::vector<std::string>& extra, const std::string& core,
                                 const std::string& exe);

// Writes the core of a crash to fd (exe: the crashed executable, if wanted).
Status WriteCore(const CliContext& ctx, const std::string& id_arg, int fd, std::string* exe);
Status RunCrashCore(const CliContext& ctx, const std::string& id, const std::string& out,
                    bool as_json);
Status RunCrashDebug(const CliContext& ctx, const std::string& id, const std::string& gdb_args,
                     bool as_json);

}  // namespace flightrec::recorder::cli
