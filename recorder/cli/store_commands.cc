// recorder list / info / verify / vacuum / sql: the store's commands, shaped
// like coredumpctl's (list, info, -1 for the newest).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/checked_json.h"
#include "common/terminal_escape.h"
#include "common/units.h"
#include "recorder/cli/cli.h"
#include "recorder/cli/label_filter.h"

namespace flightrec::recorder::cli {
namespace {

std::string Window(const store::RecordRow& r) {
  if (r.start_ns == 0 || r.end_ns <= r.start_ns) return "-";
  return fmt::format("{:.1f}s", (r.end_ns - r.start_ns) / 1e9);
}

std::string Pids(const store::RecordRow& r) {
  std::string out;
  auto add = [&](int64_t pid) {
    if (!out.empty()) out += ",";
    out += std::to_string(pid);
  };
  if (r.meta.contains("crash") && r.meta["crash"].is_object()) {
    add(json::Get<int64_t>(r.meta["crash"], "pid", 0));
  } else if (r.meta.contains("pids") && r.meta["pids"].is_array()) {
    size_t n = 0;
    for (const auto& p : r.meta["pids"]) {
      if (n++ == 4) {
        out += ",...";
        break;
      }
      if (p.is_number_integer()) add(p.get<int64_t>());
    }
  }
  return out.empty() ? "-" : out;
}

std::string Exe(const store::RecordRow& r) {
  if (r.meta.contains("crash") && r.meta["crash"].is_object()) {
    return json::Str(r.meta["crash"], "exe", "-");
  }
  if (r.meta.contains("processes") && r.meta["processes"].is_array() &&
      r.meta["processes"].size() == 1) {
    return json::Str(r.meta["processes"][0], "exe", "-");
  }
  return "-";
}

std::string Signal(const store::RecordRow& r) {
  if (r.meta.contains("crash") && r.meta["crash"].is_object()) {
    int64_t sig64 = json::Get<int64_t>(r.meta["crash"], "signal", 0);
    int sig = sig64 >= 0 && sig64 < 256 ? static_cast<int>(sig64) : 0;
    const char* abbrev = sigabbrev_np(sig);
    return abbrev ? std::string("SIG") + abbrev : std::to_string(sig);
  }
  return "-";
}

struct ListArgs {
  std::string since, until, kind, exe;
  int64_t pid = -1;
  LabelFilter labels;  // a record matches when one of its processes does
  bool json = false;
  bool newest_only = false;
  bool reverse = false;
};

bool Matches(const store::RecordRow& r, const store::ListQuery& q) {
  if (q.since_ns && r.created_ns < *q.since_ns) return false;
  if (q.until_ns && r.created_ns > *q.until_ns) return false;
  if (q.kind && r.kind != *q.kind) return false;
  const auto& crash = json::Object(r.meta, "crash");
  auto procs = r.meta.contains("processes") && r.meta["processes"].is_array()
                   ? r.meta["processes"]
                   : nlohmann::json::array();
  if (q.pid) {
    bool hit = !crash.empty() && json::Get<int64_t>(crash, "pid", -1) == *q.pid;
    for (const auto& p : procs) hit = hit || json::Get<int64_t>(p, "pid", -1) == *q.pid;
    if (!hit) return false;
  }
  if (q.exe) {
    bool hit = !crash.empty() && json::Str(crash, "exe") == *q.exe;
    for (const auto& p : procs) hit = hit || json::Str(p, "exe") == *q.exe;
    if (!hit) return false;
  }
  return true;
}

// A user who may not read the index (a root store's is 0600: it holds every
// user's metadata) lists the records granted to them: the hook gives a
// crashed user read access to their crash and its history by ACL and links
// them in by-uid/<uid>/ (the store itself is not listable by others).
StatusOr<std::vector<store::RecordRow>> ListReadableRecords(const CliContext& ctx,
                                                            const store::ListQuery& q) {
  std::vector<store::RecordRow> rows;
  ASSIGN_OR_RETURN(auto files, store::GrantedRecordFiles(ctx.store_dir, geteuid()));
  for (const auto& name : files) {
    auto reader = store::OpenGrantedRecord(ctx.store_dir, name);
    if (!reader.ok()) continue;  // another user's, root's, or damaged
    store::RecordRow r = store::RowFromReader(**reader, name);
    if (Matches(r, q)) rows.push_back(std::move(r));
  }
  std::sort(rows.begin(), rows.end(), [&](const auto& x, const auto& y) {
    return q.newest_first ? std::tie(x.created_ns, x.id) > std::tie(y.created_ns, y.id)
                          : std::tie(x.created_ns, x.id) < std::tie(y.created_ns, y.id);
  });
  if (q.limit >= 0 && rows.size() > static_cast<size_t>(q.limit)) rows.resize(q.limit);
  return rows;
}

Status RunList(const CliContext& ctx, const ListArgs& a) {
  auto s = ctx.OpenStore();
  if (!s.ok() && s.status().code() == StatusCode::kNotFound) {
    if (a.json)
      std::printf("[]\n");
    else
      std::fprintf(stderr, "No records in %s.\n", ctx.store_dir.c_str());
    return OkStatus();
  }
  const bool own_files_only =
      !s.ok() && s.status().code() == StatusCode::kPermissionDenied && geteuid() != 0;
  if (!s.ok() && !own_files_only) return s.status();
  store::ListQuery q;
  int64_t now = WallClockNs();
  if (!a.since.empty()) {
    ASSIGN_OR_RETURN(int64_t t, ParseTimeNs(a.since, now));
    q.since_ns = t;
  }
  if (!a.until.empty()) {
    ASSIGN_OR_RETURN(int64_t t, ParseTimeNs(a.until, now));
    q.until_ns = t;
  }
  if (!a.kind.empty()) q.kind = a.kind;
  if (!a.exe.empty()) q.exe = a.exe;
  if (a.pid >= 0) q.pid = static_cast<uint32_t>(a.pid);
  // An unprivileged user sees crashes of their own processes only
  // (docs/ARCHITECTURE.md, "Access").
  if (geteuid() != 0 && (!a.kind.empty() && a.kind == "crash")) q.uid = geteuid();
  q.newest_first = a.reverse || a.newest_only;
  // Labels are in each record's meta, not in the index: -1 is taken after
  // they filtered.
  if (a.newest_only && a.labels.empty()) q.limit = 1;
  std::vector<store::RecordRow> rows;
  if (own_files_only) {
    ASSIGN_OR_RETURN(rows, ListReadableRecords(ctx, q));
  } else {
    ASSIGN_OR_RETURN(rows, (*s)->List(q));
  }
  if (!a.labels.empty()) {
    std::erase_if(rows,
                  [&](const store::RecordRow& r) { return !a.labels.MatchesAnyProcess(r.meta); });
    if (a.newest_only && rows.size() > 1) rows.resize(1);
  }
  if (a.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : rows) out.push_back(r.ToJson());
    std::printf("%s\n", json::Dump(out, 2).c_str());
    return OkStatus();
  }
  if (rows.empty()) {
    std::fprintf(stderr, "No records match.\n");
    return OkStatus();
  }
  std::vector<std::vector<std::string>> table;
  for (const auto& r : rows) {
    table.push_back({r.id, FormatTimeNs(r.created_ns), r.kind, r.reason.empty() ? "-" : r.reason,
                     Window(r), Pids(r), Signal(r), Exe(r), FormatBytes(r.file_size), r.state});
  }
  std::fputs(
      FormatTable({"ID", "TIME", "KIND", "REASON", "WINDOW", "PIDS", "SIG", "EXE", "SIZE", "STATE"},
                  table)
          .c_str(),
      stdout);
  return OkStatus();
}

Status RunInfo(const CliContext& ctx, const std::string& id, bool json) {
  ASSIGN_OR_RETURN(auto s, ctx.OpenStore());
  ASSIGN_OR_RETURN(store::RecordRow row, s->Get(id));
  auto reader = s->OpenRecord(row.id);
  if (json) {
    nlohmann::json out = row.ToJson();
    if (reader.ok()) {
      out["format"] = fmt::format("{}.{}", (*reader)->header().major, (*reader)->header().minor);
      out["sections"] = nlohmann::json::array();
      for (const auto& sec : (*reader)->sections()) {
        out["sections"].push_back({{"name", sec.name},
                                   {"raw_size", sec.raw_size},
                                   {"stored_size", sec.stored_size},
                                   {"frames", sec.frames.size()},
                                   {"xxh3", fmt::format("{:016x}", sec.xxh3)}});
      }
    } else {
      out["error"] = reader.status().message();
    }
    std::printf("%s\n", json::Dump(out, 2).c_str());
    return reader.ok() ? OkStatus() : reader.status();
  }
  // Text from the record (names, paths, ids) is escaped for the terminal.
  auto E = [](const std::string& t) { return EscapeForTerminal(t); };
  std::printf("           ID: %s\n", E(row.id).c_str());
  std::printf("         Kind: %s\n", E(row.kind).c_str());
  if (!row.reason.empty()) std::printf("       Reason: %s\n", E(row.reason).c_str());
  std::printf("      Created: %s\n", FormatTimeNs(row.created_ns).c_str());
  if (row.start_ns != 0) {
    std::printf("       Window: %s .. %s (%s)\n", FormatTimeNs(row.start_ns).c_str(),
                FormatTimeNs(row.end_ns).c_str(), Window(row).c_str());
  }
  std::printf("         Host: %s\n", E(row.host).c_str());
  std::printf("       Kernel: %s\n", E(row.kernel).c_str());
  std::printf("      Boot ID: %s\n", E(row.boot_id).c_str());
  std::printf("         File: %s/%s\n", E(s->dir()).c_str(), E(row.file).c_str());
  std::printf("         Size: %s stored, %s raw\n", FormatBytes(row.file_size).c_str(),
              FormatBytes(row.raw_size).c_str());
  std::printf("        State: %s\n", E(row.state).c_str());
  if (row.meta.contains("crash") && row.meta["crash"].is_object()) {
    const auto& c = row.meta["crash"];
    std::printf("        Crash: pid %lld tid %lld %s %s\n",
                static_cast<long long>(json::Get<int64_t>(c, "pid", 0)),
                static_cast<long long>(json::Get<int64_t>(c, "tid", 0)), Signal(row).c_str(),
                E(json::Str(c, "exe")).c_str());
  }
  if (row.meta.contains("processes") && row.meta["processes"].is_array()) {
    std::printf("    Processes:");
    size_t n = 0;
    for (const auto& p : row.meta["processes"]) {
      if (n++ == 8) {
        std::printf(" ... (%zu in all)", row.meta["processes"].size());
        break;
      }
      std::printf(" %lld(%s)", static_cast<long long>(json::Get<int64_t>(p, "pid", 0)),
                  E(json::Str(p, "comm")).c_str());
    }
    std::printf("\n");
  }
  if (!reader.ok()) return reader.status();
  std::printf("       Format: %u.%u\n", (*reader)->header().major, (*reader)->header().minor);
  std::printf("     Sections:\n");
  for (const auto& sec : (*reader)->sections()) {
    double ratio = sec.stored_size ? static_cast<double>(sec.raw_size) / sec.stored_size : 0;
    std::printf("       %-12s %12s raw %12s stored  %5.1fx\n", E(sec.name).c_str(),
                FormatBytes(sec.raw_size).c_str(), FormatBytes(sec.stored_size).c_str(), ratio);
  }
  return OkStatus();
}

Status RunVerify(const CliContext& ctx, const std::string& id, bool as_json) {
  // Verify checks everything: the directory is walked even if it looks
  // unchanged since the last reconcile.
  ASSIGN_OR_RETURN(auto s, ctx.OpenStore(/*create=*/false, /*full_recovery=*/true));
  std::optional<std::string> which;
  if (!id.empty()) which = id;
  ASSIGN_OR_RETURN(auto checks, s->Check(which));
  const auto& rec = s->recovery();
  std::vector<std::string> problems;
  for (const auto& c : checks) {
    if (!c.error.empty()) problems.push_back(fmt::format("{}: {}", c.row.id, c.error));
  }
  if (rec.unreadable > 0) {
    problems.push_back(
        fmt::format("{} unindexed file(s) in {} could not be read", rec.unreadable, s->dir()));
  }
  if (as_json) {
    nlohmann::json records = nlohmann::json::array();
    for (const auto& c : checks) {
      nlohmann::json secs = nlohmann::json::array();
      for (const auto& sec : c.sections) {
        nlohmann::json j = {{"name", sec.name},
                            {"raw_size", sec.raw_size},
                            {"stored_size", sec.stored_size},
                            {"ok", sec.error.empty()}};
        if (!sec.error.empty()) j["error"] = sec.error;
        secs.push_back(std::move(j));
      }
      nlohmann::json j = {{"id", c.row.id},
                          {"file", c.row.file},
                          {"ok", c.error.empty()},
                          {"sections", std::move(secs)}};
      if (!c.error.empty()) j["error"] = c.error;
      records.push_back(std::move(j));
    }
    nlohmann::json out = {{"ok", problems.empty()},
                          {"store", s->dir()},
                          {"records", std::move(records)},
                          {"problems", problems},
                          {"recovery",
                           {{"temporaries_removed", rec.temporaries_removed},
                            {"reindexed", rec.reindexed},
                            {"marked_missing", rec.marked_missing},
                            {"unreadable", rec.unreadable}}}};
    std::printf("%s\n", json::Dump(out, 2).c_str());
  } else {
    if (rec.temporaries_removed || rec.reindexed || rec.marked_missing) {
      std::printf(
          "recovered: %d temporaries removed, %d files re-indexed, %d rows marked missing\n",
          rec.temporaries_removed, rec.reindexed, rec.marked_missing);
    }
    for (const auto& p : problems) std::printf("BAD  %s\n", EscapeForTerminal(p).c_str());
  }
  if (!problems.empty()) {
    return Corrupt(fmt::format("{} record(s) failed verification", problems.size()));
  }
  if (!as_json) {
    std::printf("ok: %s verified\n", id.empty() ? "all records" : EscapeForTerminal(id).c_str());
  }
  return OkStatus();
}

struct VacuumArgs {
  std::string max_use, keep_free, max_age, max_unshipped_use, max_unshipped_use_per_uid;
  int64_t max_count = -1;
  bool dry_run = false;
  bool json = false;
};

Status RunVacuum(const CliContext& ctx, const VacuumArgs& a) {
  ASSIGN_OR_RETURN(auto s, ctx.OpenStore());
  store::RetentionLimits lim;
  // Each size given on the command line replaces the store's setting.
  for (auto [text, field] : {std::pair{&a.max_use, &lim.max_use},
                             {&a.keep_free, &lim.keep_free},
                             {&a.max_unshipped_use, &lim.max_unshipped_use},
                             {&a.max_unshipped_use_per_uid, &lim.max_unshipped_use_per_uid}}) {
    if (text->empty()) continue;
    ASSIGN_OR_RETURN(uint64_t v, ParseSize(*text));
    *field = v;
  }
  if (!a.max_age.empty()) {
    ASSIGN_OR_RETURN(int64_t v, ParseDurationNs(a.max_age));
    lim.max_age_ns = v;
  }
  if (a.max_count >= 0) lim.max_count = static_cast<uint64_t>(a.max_count);
  ASSIGN_OR_RETURN(auto eff, s->EffectiveLimits(lim));
  ASSIGN_OR_RETURN(auto rep, s->Vacuum(lim, a.dry_run));
  if (a.json) {
    nlohmann::json out = {{"removed", rep.removed},
                          {"reasons", rep.reasons},
                          {"bytes_freed", rep.bytes_freed},
                          {"dry_run", a.dry_run},
                          {"max_use", *eff.max_use},
                          {"keep_free", *eff.keep_free},
                          {"refused", rep.refused},
                          {"notes", rep.notes},
                          {"max_unshipped_use", *eff.max_unshipped_use},
                          {"max_unshipped_use_per_uid", *eff.max_unshipped_use_per_uid}};
    std::printf("%s\n", json::Dump(out, 2).c_str());
    return OkStatus();
  }
  std::printf("limits: max-use %s, keep-free %s%s%s\n", FormatBytes(*eff.max_use).c_str(),
              FormatBytes(*eff.keep_free).c_str(),
              eff.max_age_ns ? (", max-age " + FormatDurationNs(*eff.max_age_ns)).c_str() : "",
              eff.max_count ? (", max-count " + std::to_string(*eff.max_count)).c_str() : "");
  for (size_t i = 0; i < rep.removed.size(); ++i) {
    std::printf("%s %s (%s)\n", a.dry_run ? "would remove" : "removed", rep.removed[i].c_str(),
                rep.reasons[i].c_str());
  }
  std::printf("%s %zu record(s), %s\n", a.dry_run ? "would free" : "freed", rep.removed.size(),
              FormatBytes(rep.bytes_freed).c_str());
  for (const auto& n : rep.notes) std::fprintf(stderr, "note: %s\n", n.c_str());
  return OkStatus();
}

struct SqlArgs {
  std::string query;
  bool json = false;
  double timeout_s = 10;
  int64_t max_rows = 100000;
};

Status RunSql(const CliContext& ctx, const SqlArgs& a) {
  // Read-only and without recovery: `sql` over a copied store must not
  // change it (recovery would re-index and rewrite rows).
  store::StoreOptions opts;
  opts.create = false;
  opts.read_only = true;
  ASSIGN_OR_RETURN(auto s, store::Store::Open(ctx.store_dir, opts));
  store::Index::QueryLimits lim;
  lim.timeout_ms = static_cast<int64_t>(a.timeout_s * 1000);
  lim.max_rows = static_cast<size_t>(a.max_rows);
  ASSIGN_OR_RETURN(auto rows, s->index().QueryReadOnly(a.query, lim));
  const bool json = a.json;
  if (json) {
    std::printf("%s\n", json::Dump(rows, 2).c_str());
    return OkStatus();
  }
  if (rows.empty()) return OkStatus();
  std::vector<std::string> header;
  for (const auto& [k, v] : rows[0].items()) header.push_back(k);
  std::vector<std::vector<std::string>> table;
  for (const auto& r : rows) {
    std::vector<std::string> line;
    for (const auto& k : header) {
      const auto& v = r[k];
      line.push_back(v.is_string() ? v.get<std::string>() : v.dump());
    }
    table.push_back(std::move(line));
  }
  std::fputs(FormatTable(header, table).c_str(), stdout);
  return OkStatus();
}

}  // namespace

void AddStoreCommands(CLI::App& app, CliContext& ctx) {
  auto la = std::make_shared<ListArgs>();
  auto* list = app.add_subcommand("list", "List records in the store (oldest first)");
  list->add_option("--since", la->since,
                   "Only records created at or after T (2026-11-22T12:00Z, -1h, @UNIX)");
  list->add_option("--until", la->until, "Only records created at or before T");
  list->add_option("--kind", la->kind, "Only records of this kind (dump, crash)");
  list->add_option("--pid", la->pid, "Only records that involve this process id");
  list->add_option("--exe", la->exe, "Only records that involve this executable path");
  la->labels.Register(list);
  list->add_flag("-1", la->newest_only, "Only the newest record");
  list->add_flag("-r,--reverse", la->reverse, "Newest first");
  list->add_flag("--json", la->json, "Machine-readable output");
  list->callback([&ctx, la] { ctx.action = [&ctx, la] { return RunList(ctx, *la); }; });

  auto info_id = std::make_shared<std::string>();
  auto info_json = std::make_shared<bool>(false);
  auto* info = app.add_subcommand("info", "Show a record's header, sections and metadata");
  info->add_option(
          "ID", *info_id,
          "Record id, any unique part of it (e.g. its random suffix), or -1 for the newest")
      ->required();
  info->add_flag("--json", *info_json, "Machine-readable output");
  info->callback([&ctx, info_id, info_json] {
    ctx.action = [&ctx, info_id, info_json] { return RunInfo(ctx, *info_id, *info_json); };
  });

  auto verify_id = std::make_shared<std::string>();
  auto verify_json = std::make_shared<bool>(false);
  auto* verify = app.add_subcommand(
      "verify",
      "Check records' checksums and that the index agrees with the files (exit 1 if not)");
  verify->add_option("ID", *verify_id, "One record (default: all)");
  verify->add_flag("--json", *verify_json,
                   "Machine-readable output: each record's and each section's result");
  verify->callback([&ctx, verify_id, verify_json] {
    ctx.action = [&ctx, verify_id, verify_json] {
      return RunVerify(ctx, *verify_id, *verify_json);
    };
  });

  auto va = std::make_shared<VacuumArgs>();
  auto* vacuum = app.add_subcommand(
      "vacuum",
      "Apply retention now: remove the oldest records until the limits hold. Order: max-age, "
      "max-count, max-use, keep-free. Defaults: max-use 10% of the filesystem (at most 4G), "
      "keep-free 15% (at most 4G), like systemd-coredump");
  vacuum->add_option("--max-use", va->max_use, "Total size the store may use (e.g. 2G)");
  vacuum->add_option("--keep-free", va->keep_free, "Free space to leave on the filesystem");
  vacuum->add_option("--max-age", va->max_age, "Remove records older than this (e.g. 7d)");
  vacuum->add_option("--max-count", va->max_count, "Keep at most this many records");
  vacuum->add_option("--max-unshipped-use", va->max_unshipped_use,
                     "Fleet mode: total size of records not yet shipped to keep (default: "
                     "max-use); the oldest of the heaviest user go first");
  vacuum->add_option("--max-unshipped-use-per-uid", va->max_unshipped_use_per_uid,
                     "Fleet mode: size of one user's records not yet shipped to keep (default: "
                     "half of max-unshipped-use)");
  vacuum->add_flag("-n,--dry-run", va->dry_run, "Only say what would be removed");
  vacuum->add_flag("--json", va->json, "Machine-readable output");
  vacuum->callback([&ctx, va] { ctx.action = [&ctx, va] { return RunVacuum(ctx, *va); }; });

  auto sa = std::make_shared<SqlArgs>();
  auto* sql = app.add_subcommand(
      "sql",
      "Run a read-only SQL query over the index (tables: records, record_processes, crashes, "
      "file_cookies; see docs/FORMAT.md)");
  sql->add_option("QUERY", sa->query, "One SELECT statement")->required();
  sql->add_flag("--json", sa->json, "Rows as a JSON array");
  sql->add_option("--timeout", sa->timeout_s, "Interrupt the query after this many seconds")
      ->check(CLI::Range(0.001, 3600.0))
      ->capture_default_str();
  sql->add_option("--max-rows", sa->max_rows, "Refuse output of more rows than this")
      ->check(CLI::Range(int64_t{1}, int64_t{100000000}))
      ->capture_default_str();
  sql->callback([&ctx, sa] { ctx.action = [&ctx, sa] { return RunSql(ctx, *sa); }; });
}

}  // namespace flightrec::recorder::cli
