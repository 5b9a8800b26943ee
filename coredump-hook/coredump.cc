// RunHook: the hook's stages, in the order the privileges allow. The stages
// live one concern per file, along systemd-coredump's lines: context.cc
// (metadata from /proc), config.cc (argv, options, settings file),
// rate_limit.cc, sandbox.cc (the sandboxed unwinder child, privilege drop,
// seccomp), backtrace.cc (the walkers it runs) and submit.cc (history, the
// record, its commit and the crashed user's access).
#include "coredump-hook/coredump.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "common/private_dir.h"
#include "common/units.h"
#include "coredump-hook/config.h"
#include "coredump-hook/context.h"
#include "coredump-hook/rate_limit.h"
#include "coredump-hook/sandbox.h"
#include "coredump-hook/submit.h"
#include "recorder/record/record_kind.h"
#include "store/store.h"

namespace flightrec::coredump {
namespace {

// Logs why nothing was stored and gives the hook's exit code for it.
int NotStored(const Crash& c, const char* what, const std::string& why) {
  Log(fmt::format("pid {} ({}) {}: {} not stored: {}", c.a.pid, c.a.comm, c.signame, what, why));
  return 1;
}

void LogSummary(const Crash& c, const store::RecordRow& row, bool core_stored) {
  std::string summary =
      fmt::format("pid {} ({}) {}: stored as {} ({}{}{})", c.a.pid, c.a.comm, c.signame, row.id,
                  core_stored ? FormatBytes(c.core_size) : std::string("no core"),
                  c.history_id.empty() ? ", no history" : ", history " + c.history_id,
                  c.truncated ? ", truncated" : "");
  if (core_stored && !c.compression.empty()) summary += "; " + c.compression;
  for (const auto& n : c.notes) summary += "; " + n;
  Log(summary);
}

}  // namespace

int RunHook(const HookArgs& kernel_args, const HookOptions& o, int core_fd) {
  // ---- privileged part: /proc of the crashed process (another user's),
  // the unwinder's temporary file handed to that user, the unwinder started
  // as that user.
  Crash c = CollectCrash(kernel_args);
  if (IsHookItself(c.exe_id)) {
    Log("not handling a crash of recorder-coredump itself (no loop)");
    return 0;
  }
  for (const auto& t : c.md.value("threads", nlohmann::json::array())) {
    c.global_tids[t.value("ns_tid", 0)] = t.value("tid", 0);
  }
  c.global_tids[c.a.tid] = c.a.global_tid;
  SandboxedBacktrace unwinder;
  unwinder.Start(o, c);
  // ---- everything else needs no privilege but signalling the unwinder:
  // the store and its index are root's files (0600), written as their owner.
  if (geteuid() == 0) {
    if (Status s = DropPrivileges(); !s.ok()) {
      c.notes.push_back("could not drop privileges: " + s.ToString());
    }
  }

  // The hook is root: in a store another user controls, that user could
  // swap in symlinks or plant records for it to index, open and delete.
  if (Status safe = CheckPrivateDir(o.store_dir, "store"); !safe.ok()) {
    return NotStored(c, "crash", safe.message());
  }
  store::StoreOptions so;
  so.group_readable = false;
  // The record is durable once its file and the store's directory are
  // fsynced (Commit); checkpointing the index's WAL at the hook's exit
  // cost four more syncs, ~17 ms per crash on a busy host (strace), for a
  // row that the next writable open re-indexes if it is ever lost.
  so.checkpoint_index_on_close = false;
  auto st = store::Store::Open(o.store_dir, so);
  if (!st.ok()) return NotStored(c, "core", st.status().message());
  std::string limited_why = ReserveCoreSlot(o, c.a.uid, c.exe);
  c.limited = !limited_why.empty();
  if (c.limited) c.notes.push_back(limited_why);
  if (!c.limited) RequestHistory(o, &c);

  auto rec = (*st)->BeginRecord(recorder::RecordKindName(recorder::RecordKind::kCrash));
  if (!rec.ok()) return NotStored(c, "crash", rec.status().message());
  // The core's own write: when it fails (a full disk, a quota), the rest of
  // the crash is still stored, without the core.
  Status core_io;
  if (!c.limited) {
    core_io = StreamCore(core_fd, o, rec->get(), &unwinder, &c);
    unwinder.Finish(&c);
  }
  bool core_stored = !c.limited && c.core_size > 0;
  auto row = CommitCrash(**st, std::move(*rec), core_io, &core_stored, &c);
  if (!row.ok()) return NotStored(c, "crash", row.status().message());
  GrantCrashedUser(**st, *row, c);
  LogSummary(c, *row, core_stored);
  LogToJournal(*row, c);
  return 0;
}

int CoredumpMain(int argc, char** argv) {
  HookOptions o;
  HookArgs args;
  if (int code = ParseHookCommandLine(argc, argv, &o, &args); code >= 0) return code;
  // The kernel's pidfd (%F) must not leak into the unwinder or gdb-like
  // children; ReadMetadata takes it over.
  if (args.pidfd >= 0) fcntl(args.pidfd, F_SETFD, FD_CLOEXEC);
  umask(077);
  // An unwinder that died before being told to start must not take the
  // hook down with it through its go pipe.
  signal(SIGPIPE, SIG_IGN);
  return RunHook(args, o, STDIN_FILENO);
}

}  // namespace flightrec::coredump
