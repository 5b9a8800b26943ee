#include "coredump-hook/submit.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "common/cgroup.h"
#include "common/checked_json.h"
#include "common/terminal_escape.h"
#include "common/units.h"
#include "journal/journal_entry.h"
#include "recorder/ipc/ipc.h"
#include "recorder/record/record_kind.h"

namespace flightrec::coredump {
namespace {

// Asks recorderd for the process's last seconds; returns the record id or
// sets *why.
std::string AskHistory(const HookArgs& a, const HookOptions& o, std::string* why,
                       std::string* file) {
  // One deadline for connecting and dumping: the crashed process (and the
  // core in the pipe) waits for us meanwhile.
  auto timeout = std::chrono::milliseconds(o.history_timeout_ms);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto client = recorder::ipc::Client::Connect(o.socket_path, timeout);
  if (!client.ok()) {
    *why = "recorderd is not reachable: " + client.status().message();
    return "";
  }
  nlohmann::json params = {
      {"last_ns", o.history_ns},
      {"pids", {a.pid}},
      {"crash_pid", a.pid},
      // recorderd budgets histories per crashed user, and leaves kernel addresses
      // out of a record that is granted to a user.
      {"for_uid", a.uid},
      // comm is bytes; the request is JSON (UTF-8). The crash record keeps
      // the exact name.
      {"reason", ToValidUtf8(fmt::format("history of {} ({}) killed by SIG{}", a.comm, a.pid,
                                         sigabbrev_np(a.signal) ? sigabbrev_np(a.signal) : "?"))}};
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  auto r = (*client)->Call("dump", params, std::max(left, std::chrono::milliseconds(1)));
  if (!r.ok()) {
    *why = fmt::format("recorderd did not give history within {} ms: {}", o.history_timeout_ms,
                       r.status().message());
    return "";
  }
  // Checked reads: an answer of the wrong shape is no history, not an
  // exception that takes the crash with it.
  *file = json::Str(*r, "file");
  std::string id = json::Str(*r, "id");
  if (id.empty()) *why = "recorderd's answer names no history record";
  return id;
}

}  // namespace

void RequestHistory(const HookOptions& o, Crash* c) {
  std::string why;
  c->history_id = AskHistory(c->a, o, &why, &c->history_file);
  if (!why.empty()) c->notes.push_back(why);
}

namespace {

// Reads exactly n bytes (fewer only at an error or the end).
size_t ReadFull(int fd, char* buf, size_t n, int* err) {
  size_t got = 0;
  *err = 0;
  while (got < n) {
    ssize_t r = read(fd, buf + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) *err = errno;
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  return got;
}

}  // namespace

Status StreamCore(int core_fd, const HookOptions& o, store::PendingRecord* rec,
                  CoreCopyTarget* unwinder, Crash* c) {
  // The core goes into the record, and to the sandboxed unwinder, which
  // keeps what unwinding needs of it in the temporary file.
  auto& w = rec->writer();
  CompressionGovernor governor(o.compression, ReadCpuSight());
  w.SetCompression(governor.choice().level, governor.choice().workers);
  Status core_io = w.BeginSection("core");
  // Under core_pattern the core comes through a pipe the kernel sizes at
  // 64 KiB: the dumping task and the hook would take turns 16 times per MiB.
  // 1 MiB, the hook's read size (best effort: within fs.pipe-max-size, as
  // the hook has no CAP_SYS_RESOURCE by now).
  struct stat sb;
  const bool from_pipe = fstat(core_fd, &sb) == 0 && S_ISFIFO(sb.st_mode);
  if (from_pipe) (void)fcntl(core_fd, F_SETPIPE_SZ, 1 << 20);
  std::vector<char> buf(1 << 20);
  for (;;) {
    if (c->core_size >= o.max_core_bytes) {
      char probe;
      c->truncated = read(core_fd, &probe, 1) > 0;
      break;
    }
    size_t want =
        static_cast<size_t>(std::min<uint64_t>(buf.size(), o.max_core_bytes - c->core_size));
    // From a pipe, the unwinder's copy is the kernel's pipe buffers
    // themselves (tee: the same pages, no copy by the hook); then exactly
    // those bytes are read for the record. Within the same limit as a read.
    ssize_t teed = from_pipe ? unwinder->TeeFrom(core_fd, want) : -1;
    if (teed == 0) break;
    if (teed > 0) want = static_cast<size_t>(teed);
    int err = 0;
    size_t n = ReadFull(core_fd, buf.data(), want, &err);
    if (teed > 0 && n < want) {
      // Cannot happen (the bytes were in the pipe, and the hook is its only
      // reader); the unwinder's copy would be ahead of the record.
      c->notes.push_back(fmt::format("the core's pipe gave {} of {} bytes it held", n, want));
    }
    if (n > 0) {
      // Past a failed write the core is still read to its end: the
      // unwinder needs it, and a backtrace is worth more than a core.
      if (core_io.ok()) core_io = w.Write(std::string_view(buf.data(), n));
      if (teed < 0) unwinder->Feed(buf.data(), n);
      c->core_size += n;
      if (governor.Observe(n)) {
        w.SetCompression(governor.choice().level, governor.choice().workers);
      }
    }
    if (err != 0) c->notes.push_back(std::string("reading the core failed: ") + std::strerror(err));
    if (n < want) break;  // ReadFull stops short only at the end or an error
  }
  c->compression = governor.history();
  if (core_io.ok()) core_io = w.EndSection();
  // What follows (metadata, maps, backtrace) is kilobytes: the hook's own
  // thread compresses it (waking a worker per section cost more, on a busy
  // host milliseconds each), and the workers go now, while the unwinder
  // finishes, rather than at the commit.
  w.SetCompression(o.compression.level, 0);
  // The core's writeback starts now and runs while the unwinder finishes:
  // the commit's fsync then finds little left to write. (Not as it grows:
  // a sync_file_range every 2 MiB of record made a 2 GiB core's hook 1.6x
  // slower on a busy host, 10-12 s against 6-7 s.)
  if (core_io.ok()) (void)sync_file_range(w.fd(), 0, 0, SYNC_FILE_RANGE_WRITE);
  if (c->truncated) {
    c->notes.push_back(fmt::format("core truncated at {} bytes (limit)", c->core_size));
  }
  if (c->core_size == 0) c->notes.push_back("the kernel sent an empty core");
  return core_io;
}

namespace {

// Why a core that could not be written is missing, like systemd-coredump's
// entries without one.
std::string CoreMissing(const Status& why, uint64_t core_size) {
  return why.code() == StatusCode::kNoSpace
             ? fmt::format("core not stored: no space left in the store for its {} ({})",
                           FormatBytes(core_size), why.ToString())
             : fmt::format("core not stored: {}", why.ToString());
}

// Finishes `r` (holding the core or not) with the metadata, the maps and
// the backtrace, and commits it.
StatusOr<store::RecordRow> Finish(store::Store& st, std::unique_ptr<store::PendingRecord> r,
                                  bool with_core, const Crash& c) {
  const HookArgs& a = c.a;
  auto& w = r->writer();
  // comm and exe are the process's bytes: SetText below.
  nlohmann::json crash = {{"pid", a.pid},
                          {"tid", a.tid},
                          {"global_tid", a.global_tid},
                          {"signal", a.signal},
                          {"signal_name", c.signame},
                          {"time_ns", a.time_s * 1'000'000'000LL},
                          {"uid", a.uid},
                          {"gid", a.gid},
                          {"dumpable", a.dumpable},
                          {"core_size", c.core_size},
                          {"truncated", c.truncated},
                          {"core_stored", with_core},
                          {"rate_limited", c.limited},
                          {"history", c.history_id},
                          {"core_compression", c.compression},
                          {"notes", nlohmann::json::array()}};
  json::SetText(crash, "comm", a.comm);
  json::SetText(crash, "exe", c.exe);
  // Notes quote names and paths: readable UTF-8 (the exact bytes are in
  // the fields above).
  for (const auto& n : c.notes) crash["notes"].push_back(ToValidUtf8(n));
  RETURN_IF_ERROR(w.AddSection("metadata", json::Dump(c.md)));
  // The address space at the crash, as /proc showed it (text).
  if (!c.maps.empty()) RETURN_IF_ERROR(w.AddSection("maps", c.maps));
  if (!c.backtrace.is_null()) RETURN_IF_ERROR(w.AddSection("backtrace", json::Dump(c.backtrace)));
  nlohmann::json process = {{"pid", a.pid}, {"uid", a.uid}};
  json::SetText(process, "comm", a.comm);
  json::SetText(process, "exe", c.exe);
  cgroup::AddCgroupToJson(cgroup::ParseProcCgroup(json::RawText(c.md, "cgroup")), &process);
  nlohmann::json meta = {
      {"reason", ToValidUtf8(fmt::format("{} ({}) killed by {}", a.comm, a.pid, c.signame))},
      {"crash", crash},
      {"pids", {a.pid}},
      {"processes", {process}},
      {"start_ns", a.time_s * 1'000'000'000LL},
      {"end_ns", a.time_s * 1'000'000'000LL}};
  return st.Commit(std::move(r), meta);
}

}  // namespace

StatusOr<store::RecordRow> CommitCrash(store::Store& st, std::unique_ptr<store::PendingRecord> rec,
                                       const Status& core_io, bool* core_stored, Crash* c) {
  // Without the core, in a fresh record: the failed one's temporary file
  // (and the space its part of the core took) goes first.
  auto finish_without_core = [&](const Status& why) -> StatusOr<store::RecordRow> {
    c->notes.push_back(CoreMissing(why, c->core_size));
    *core_stored = false;
    rec.reset();
    ASSIGN_OR_RETURN(auto fresh,
                     st.BeginRecord(recorder::RecordKindName(recorder::RecordKind::kCrash)));
    return Finish(st, std::move(fresh), false, *c);
  };
  StatusOr<store::RecordRow> row =
      core_io.ok() ? Finish(st, std::move(rec), *core_stored, *c) : finish_without_core(core_io);
  // A commit that failed with the core (its end, the index) is tried once
  // more without it.
  if (!row.ok() && *core_stored) row = finish_without_core(row.status());
  return row;
}

void GrantCrashedUser(store::Store& st, const store::RecordRow& row, const Crash& c) {
  // An ACL on the root-owned file, as systemd-coredump does, and a link in
  // by-uid/<uid>/ so the user finds it in a store they may not list. Cores
  // of processes that were not dumpable (setuid and the like) stay root's.
  if (c.a.uid == 0 || !c.a.dumpable) return;
  for (const std::string& f : {row.file, c.history_file}) {
    if (f.empty() || f.find('/') != std::string::npos) continue;
    Status acl = st.GrantReader(f, c.a.uid);
    if (!acl.ok()) Log(fmt::format("{}: {}", row.id, acl.message()));
  }
}

void LogToJournal(const store::RecordRow& row, const Crash& c) {
  journal::JournalEntry e;
  e.kind = journal::RecordKind::kCrash;
  e.record_id = row.id;
  e.history_id = c.history_id;
  e.exe = c.exe;
  e.comm = c.a.comm;
  e.unit = cgroup::ParseProcCgroup(json::RawText(c.md, "cgroup")).unit;
  e.signal = c.a.signal;
  e.pid = c.a.pid;
  e.uid = c.a.uid;
  // The record is committed: without journald (or with one that stopped
  // reading) only the entry is missing, which is no news for the admin.
  if (Status s = journal::LogRecordToJournal(e); !s.ok()) {
    Log(fmt::format("{}: {}", row.id, s.message()), 7);
  }
}

}  // namespace flightrec::coredump
