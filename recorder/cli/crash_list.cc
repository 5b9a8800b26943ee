// recorder crash list (modelled on coredumpctl list), and finding one crash
// for the other crash commands.
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/cgroup.h"
#include "common/checked_json.h"
#include "common/units.h"
#include "recorder/cli/crash_internal.h"
#include "recorder/cli/panic_info.h"
#include "recorder/record/sections.h"

namespace flightrec::recorder::cli {

std::optional<uint32_t> VisibleUid() {
  if (geteuid() == 0) return std::nullopt;
  return static_cast<uint32_t>(getuid());
}

Status CheckAccess(const nlohmann::json& meta) {
  auto uid = VisibleUid();
  if (!uid) return OkStatus();
  const auto& c = json::Object(meta, "crash");
  if (json::Get<uint32_t>(c, "uid", UINT32_MAX) != *uid || !json::Get<bool>(c, "dumpable", true)) {
    return Status(StatusCode::kPermissionDenied, "that crash belongs to another user");
  }
  return OkStatus();
}

std::string ExecutableForDisplay(const nlohmann::json& crash) {
  std::string exe = json::RawText(crash, "exe");
  if (!exe.empty() && exe.front() == '/') return exe;
  return "(not recorded; comm " + json::RawText(crash, "comm") + ")";
}

StatusOr<std::vector<CrashRow>> ListCrashes(const CliContext& ctx, const store::ListQuery& q) {
  std::vector<CrashRow> out;
  if (!VisibleUid()) {
    ASSIGN_OR_RETURN(auto store, ctx.OpenStore());
    ASSIGN_OR_RETURN(auto rows, store->List(q));
    // Deaths without a core are listed with the crashes (their `crash`
    // object is indexed like a crash's), and kernel panics too (--pid/--exe
    // name a process: no panic matches them).
    if (q.kind && ParseRecordKind(*q.kind) == RecordKind::kCrash) {
      for (RecordKind kind : {RecordKind::kDeath, RecordKind::kOom, RecordKind::kPanic}) {
        if (kind == RecordKind::kPanic && (q.pid || q.exe)) continue;
        store::ListQuery pq = q;
        pq.kind = RecordKindName(kind);
        ASSIGN_OR_RETURN(auto more, store->List(pq));
        for (auto& r : more) rows.push_back(std::move(r));
      }
      std::stable_sort(rows.begin(), rows.end(),
                       [](const auto& a, const auto& b) { return a.created_ns < b.created_ns; });
    }
    for (auto& r : rows)
      out.push_back({r.id, r.created_ns, r.file_size, std::move(r.meta), ParseRecordKind(r.kind)});
    return out;
  }
  // The store is not listable by others: the hook links each user's
  // records in by-uid/<uid>/.
  ASSIGN_OR_RETURN(auto files, store::GrantedRecordFiles(ctx.store_dir, *VisibleUid()));
  for (const auto& f : files) {
    auto reader = store::OpenGrantedRecord(ctx.store_dir, f);
    if (!reader.ok()) continue;  // another user's, or root's
    const auto& meta = (*reader)->meta();
    const auto& c = json::Object(meta, "crash");
    const RecordKind kind = ParseRecordKind((*reader)->header().kind);
    if ((kind != RecordKind::kCrash && kind != RecordKind::kDeath && kind != RecordKind::kOom) ||
        json::Get<uint32_t>(c, "uid", UINT32_MAX) != *VisibleUid())
      continue;
    if (q.pid && json::Get<uint32_t>(c, "pid", 0) != *q.pid) continue;
    if (q.exe && json::Str(c, "exe") != *q.exe) continue;
    if (q.since_ns && (*reader)->header().created_ns < *q.since_ns) continue;
    out.push_back({(*reader)->header().id, (*reader)->header().created_ns, (*reader)->file_size(),
                   meta, kind});
  }
  std::sort(out.begin(), out.end(),
            [](const CrashRow& a, const CrashRow& b) { return a.created_ns < b.created_ns; });
  return out;
}

StatusOr<std::pair<CrashRow, std::unique_ptr<store::RecordReader>>> OpenCrash(
    const CliContext& ctx, const std::string& id) {
  if (!VisibleUid()) {
    ASSIGN_OR_RETURN(auto store, ctx.OpenStore());
    std::string want = id;
    if (id == "-1") {
      store::ListQuery q;
      q.kind = RecordKindName(RecordKind::kCrash);
      ASSIGN_OR_RETURN(auto rows, ListCrashes(ctx, q));
      if (rows.empty()) return NotFound("no crashes in the store");
      want = rows.back().id;
    }
    ASSIGN_OR_RETURN(auto row, store->Get(want));
    const RecordKind kind = ParseRecordKind(row.kind);
    if (kind != RecordKind::kCrash && kind != RecordKind::kPanic && kind != RecordKind::kDeath &&
        kind != RecordKind::kOom) {
      return InvalidArgument(fmt::format("{} is a {}, not a crash", want, row.kind));
    }
    ASSIGN_OR_RETURN(auto reader, store->OpenRecord(want));
    return std::make_pair(CrashRow{row.id, row.created_ns, row.file_size, row.meta, kind},
                          std::move(reader));
  }
  store::ListQuery q;
  ASSIGN_OR_RETURN(auto rows, ListCrashes(ctx, q));
  // The same rule as the store's index: exact id, else a unique substring.
  const CrashRow* found = nullptr;
  std::vector<const CrashRow*> matches;
  for (const auto& r : rows) {
    if (id == "-1" || r.id == id) found = &r;
    if (r.id.find(id) != std::string::npos) matches.push_back(&r);
  }
  if (found == nullptr && matches.size() == 1) found = matches[0];
  if (found == nullptr && matches.size() > 1) {
    std::string names;
    for (size_t i = 0; i < matches.size() && i < 8; ++i)
      names += (names.empty() ? "" : ", ") + matches[i]->id;
    if (matches.size() > 8) names += fmt::format(" and {} more", matches.size() - 8);
    return InvalidArgument(
        fmt::format("'{}' is ambiguous: {} crashes match ({}); give more of "
                    "the id",
                    id, matches.size(), names));
  }
  if (found == nullptr) {
    return Status(StatusCode::kNotFound,
                  fmt::format("no crash {} of yours (other users' crashes are not shown)", id));
  }
  ASSIGN_OR_RETURN(auto reader, store::OpenGrantedRecord(ctx.store_dir, found->id + ".frec"));
  return std::make_pair(*found, std::move(reader));
}

StatusOr<std::unique_ptr<store::RecordReader>> OpenHistory(const CliContext& ctx,
                                                           const std::string& hid) {
  if (!VisibleUid()) {
    ASSIGN_OR_RETURN(auto store, ctx.OpenStore());
    return store->OpenRecord(hid);
  }
  auto reader = store::OpenGrantedRecord(ctx.store_dir, hid + ".frec");
  if (!reader.ok() && reader.status().code() == StatusCode::kNotFound) {
    return NotFound("history record " + hid + " is gone");
  }
  return reader;
}

namespace {

// Where the crashed process ran, from its meta.processes entry: the core
// hook's labels from its /proc/PID/cgroup (none in older records).
cgroup::CgroupInfo CrashedProcessCgroup(const nlohmann::json& meta, const nlohmann::json& crash) {
  const int64_t pid = json::Get<int64_t>(crash, "pid", 0);
  for (const auto& p : json::Array(meta, "processes")) {
    if (json::Get<int64_t>(p, "pid", -1) == pid) return cgroup::CgroupFromJson(p);
  }
  return {};
}

}  // namespace

Status RunCrashList(const CliContext& ctx, const CrashListArgs& a) {
  store::ListQuery q;
  q.kind = RecordKindName(RecordKind::kCrash);
  if (a.pid >= 0) q.pid = static_cast<uint32_t>(a.pid);
  if (!a.exe.empty()) q.exe = a.exe;
  if (!a.since.empty()) {
    ASSIGN_OR_RETURN(int64_t t, ParseTimeNs(a.since, WallClockNs()));
    q.since_ns = t;
  }
  q.uid = VisibleUid();
  // The newest from the index alone: one row, not every crash read and
  // parsed to keep the last (which grew with the store: issue 17).
  if (a.newest && !q.uid && a.labels.empty()) {
    q.newest_first = true;
    q.limit = 1;
  }
  ASSIGN_OR_RETURN(auto rows, ListCrashes(ctx, q));
  // Where the process ran is in each record's meta, not in the index's
  // columns; a panic names no process, so no label matches it.
  if (!a.labels.empty()) {
    std::erase_if(rows, [&](const CrashRow& r) {
      return r.kind == RecordKind::kPanic ||
             !a.labels.Matches(CrashedProcessCgroup(r.meta, json::Object(r.meta, "crash")));
    });
  }
  if (a.newest && rows.size() > 1) rows.erase(rows.begin(), rows.end() - 1);
  return PrintCrashList(rows, a.json);
}

namespace {

// The container (runtime://, the id as `docker ps` shortens it) or the
// systemd unit, which say more than a pid; else the pid.
std::string PidCell(const nlohmann::json& meta, const nlohmann::json& crash) {
  const cgroup::CgroupInfo c = CrashedProcessCgroup(meta, crash);
  if (!c.container_id.empty()) {
    return (c.container_runtime.empty() ? "" : c.container_runtime + "://") +
           c.container_id.substr(0, 12);
  }
  if (!c.unit.empty()) return c.unit;
  return std::to_string(json::Get<int64_t>(crash, "pid", 0));
}

}  // namespace

Status PrintCrashList(const std::vector<CrashRow>& rows, bool as_json) {
  if (as_json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : rows) {
      if (r.kind == RecordKind::kPanic) {
        out.push_back(PanicListJson(r.id, r.created_ns, r.file_size, r.meta));
        continue;
      }
      nlohmann::json c = json::Object(r.meta, "crash");
      c["kind"] = r.kind;
      c["id"] = r.id;
      c["created_ns"] = r.created_ns;
      c["stored_bytes"] = r.file_size;
      cgroup::AddCgroupToJson(CrashedProcessCgroup(r.meta, json::Object(r.meta, "crash")), &c);
      out.push_back(std::move(c));
    }
    std::printf("%s\n", json::Dump(out, 2).c_str());
    return OkStatus();
  }
  // (FormatTable escapes every cell for the terminal.)
  std::vector<std::vector<std::string>> table;
  for (const auto& r : rows) {
    if (r.kind == RecordKind::kPanic) {
      table.push_back(PanicListCells(r.id, r.created_ns, r.meta));
      continue;
    }
    const auto& c = json::Object(r.meta, "crash");
    std::string core = json::Get<bool>(c, "core_stored", false)
                           ? FormatBytes(json::Get<uint64_t>(c, "core_size", 0)) +
                                 (json::Get<bool>(c, "truncated", false) ? " (truncated)" : "")
                           : "none";
    // A death (or OOM kill) record is its own history.
    const std::string history =
        r.kind == RecordKind::kDeath || r.kind == RecordKind::kOom ? r.id : json::Str(c, "history");
    table.push_back({r.id, RecordKindName(r.kind), FormatTimeNs(r.created_ns), PidCell(r.meta, c),
                     std::to_string(json::Get<int64_t>(c, "uid", 0)), json::Str(c, "signal_name"),
                     ExecutableForDisplay(c), core, history.empty() ? "-" : history});
  }
  std::fputs(
      FormatTable({"ID", "KIND", "TIME", "PID/UNIT", "UID", "SIG", "EXE", "CORE", "HISTORY"}, table)
          .c_str(),
      stdout);
  if (rows.empty()) std::printf("(no crashes)\n");
  return OkStatus();
}

}  // namespace flightrec::recorder::cli
