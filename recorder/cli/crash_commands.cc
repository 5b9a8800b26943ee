// recorder crash list|info|core|debug (modelled on coredumpctl) and
// recorder coredump install|uninstall (the core_pattern handler).
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/checked_json.h"
#include "common/scoped_fd.h"
#include "common/terminal_escape.h"
#include "common/units.h"
#include "coredump-hook/coredump.h"
#include "recorder/analysis/replay.h"
#include "recorder/cli/cli.h"
#include "recorder/cli/timeline.h"

namespace flightrec::recorder::cli {
namespace {

// Sections of a crash record read into memory for `crash info`: the writer
// keeps them far smaller; a record claiming more is not trusted with it.
constexpr uint64_t kMaxCrashSectionBytes = 64ull << 20;

// Crashes a user may see: root sees all; others see their own processes'
// crashes, and never those of non-dumpable processes (setuid & co).
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

// A crash as the list and lookups see it, from the index (root) or, for
// other users who cannot read the index, from the record files they are
// allowed to open (the hook grants the crashed user read access by ACL).
struct CrashRow {
  std::string id;
  int64_t created_ns = 0;
  uint64_t file_size = 0;
  nlohmann::json meta;
};

StatusOr<std::vector<CrashRow>> ListCrashes(const CliContext& ctx, const store::ListQuery& q) {
  std::vector<CrashRow> out;
  if (!VisibleUid()) {
    ASSIGN_OR_RETURN(auto store, ctx.OpenStore());
    ASSIGN_OR_RETURN(auto rows, store->List(q));
    for (auto& r : rows) out.push_back({r.id, r.created_ns, r.file_size, std::move(r.meta)});
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
    if ((*reader)->header().kind != "crash" ||
        json::Get<uint32_t>(c, "uid", UINT32_MAX) != *VisibleUid())
      continue;
    if (q.pid && json::Get<uint32_t>(c, "pid", 0) != *q.pid) continue;
    if (q.exe && json::Str(c, "exe") != *q.exe) continue;
    if (q.since_ns && (*reader)->header().created_ns < *q.since_ns) continue;
    out.push_back(
        {(*reader)->header().id, (*reader)->header().created_ns, (*reader)->file_size(), meta});
  }
  std::sort(out.begin(), out.end(),
            [](const CrashRow& a, const CrashRow& b) { return a.created_ns < b.created_ns; });
  return out;
}

// The crash for an id, any unique part of one, or -1, with its reader.
StatusOr<std::pair<CrashRow, std::unique_ptr<store::RecordReader>>> OpenCrash(
    const CliContext& ctx, const std::string& id) {
  if (!VisibleUid()) {
    ASSIGN_OR_RETURN(auto store, ctx.OpenStore());
    std::string want = id;
    if (id == "-1") {
      store::ListQuery q;
      q.kind = "crash";
      ASSIGN_OR_RETURN(auto rows, store->List(q));
      if (rows.empty()) return NotFound("no crashes in the store");
      want = rows.back().id;
    }
    ASSIGN_OR_RETURN(auto row, store->Get(want));
    if (row.kind != "crash") {
      return InvalidArgument(fmt::format("{} is a {}, not a crash", want, row.kind));
    }
    ASSIGN_OR_RETURN(auto reader, store->OpenRecord(want));
    return std::make_pair(CrashRow{row.id, row.created_ns, row.file_size, row.meta},
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

// The history record linked to a crash (root: through the store; others:
// the file the hook made readable to them).
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

struct CrashListArgs {
  bool newest = false;
  bool json = false;
  std::string since;
  int64_t pid = -1;
  std::string exe;
};

Status PrintCrashList(const std::vector<CrashRow>& rows, bool as_json);

Status RunCrashList(const CliContext& ctx, const CrashListArgs& a) {
  store::ListQuery q;
  q.kind = "crash";
  if (a.pid >= 0) q.pid = static_cast<uint32_t>(a.pid);
  if (!a.exe.empty()) q.exe = a.exe;
  if (!a.since.empty()) {
    ASSIGN_OR_RETURN(int64_t t, ParseTimeNs(a.since, WallClockNs()));
    q.since_ns = t;
  }
  q.uid = VisibleUid();
  ASSIGN_OR_RETURN(auto rows, ListCrashes(ctx, q));
  if (a.newest && rows.size() > 1) rows.erase(rows.begin(), rows.end() - 1);
  return PrintCrashList(rows, a.json);
}

Status PrintCrashList(const std::vector<CrashRow>& rows, bool as_json) {
  if (as_json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : rows) {
      nlohmann::json c = json::Object(r.meta, "crash");
      c["id"] = r.id;
      c["created_ns"] = r.created_ns;
      c["stored_bytes"] = r.file_size;
      out.push_back(std::move(c));
    }
    std::printf("%s\n", json::Dump(out, 2).c_str());
    return OkStatus();
  }
  // (FormatTable escapes every cell for the terminal.)
  std::vector<std::vector<std::string>> table;
  for (const auto& r : rows) {
    const auto& c = json::Object(r.meta, "crash");
    std::string core = json::Get<bool>(c, "core_stored", false)
                           ? FormatBytes(json::Get<uint64_t>(c, "core_size", 0)) +
                                 (json::Get<bool>(c, "truncated", false) ? " (truncated)" : "")
                           : "none";
    const std::string history = json::Str(c, "history");
    table.push_back({r.id, FormatTimeNs(r.created_ns),
                     std::to_string(json::Get<int64_t>(c, "pid", 0)),
                     std::to_string(json::Get<int64_t>(c, "uid", 0)), json::Str(c, "signal_name"),
                     json::RawText(c, "exe"), core, history.empty() ? "-" : history});
  }
  std::fputs(
      FormatTable({"ID", "TIME", "PID", "UID", "SIG", "EXE", "CORE", "HISTORY"}, table).c_str(),
      stdout);
  if (rows.empty()) std::printf("(no crashes)\n");
  return OkStatus();
}

void PrintFrames(const nlohmann::json& frames, size_t max) {
  size_t n = 0;
  for (const auto& f : frames) {
    if (n == max) {
      std::printf("      ... %zu more\n", frames.size() - max);
      break;
    }
    // Function, file and DSO names come from the crashed program's binary.
    std::string fn = json::Str(f, "function");
    if (fn.empty()) {
      fn = fmt::format("{}+0x{:x}", json::Str(f, "dso", "?"), json::Get<uint64_t>(f, "offset", 0));
    }
    std::string where =
        json::Field(f, "file").is_null()
            ? ""
            : fmt::format(" at {}:{}", json::Str(f, "file"), json::Get<int64_t>(f, "line", 0));
    std::printf("    #%-2zu 0x%016llx %s%s (%s)%s\n", n,
                static_cast<unsigned long long>(json::Get<uint64_t>(f, "ip", 0)),
                EscapeForTerminal(fn).c_str(),
                json::Get<bool>(f, "inlined", false) ? " [inlined]" : "",
                EscapeForTerminal(json::Str(f, "dso")).c_str(), EscapeForTerminal(where).c_str());
    ++n;
  }
}

struct CrashInfoArgs {
  std::string id;
  bool json = false;
  bool maps = false;
  int bins = 20;
};

// The crashing thread's last seconds from the linked history record: top
// functions, its last samples, and a timeline over the record's window (the
// same bins as `recorder timeline`). Samples carry tids of the initial pid
// namespace, so the thread is %I (global_tid), not %i.
StatusOr<nlohmann::json> CrashHistory(const store::RecordReader& hreader,
                                      const nlohmann::json& crash, const std::string& hid,
                                      int bins) {
  analysis::ReplayOptions ro;
  ro.pid = json::Get<uint32_t>(crash, "pid", 0);
  const uint32_t tid =
      json::Get<uint32_t>(crash, "global_tid", json::Get<uint32_t>(crash, "tid", 0));
  if (tid != 0) ro.tid = tid;
  ro.progress = false;
  analysis::RecordInfo info;
  std::map<std::string, uint64_t> top;
  std::set<std::string> labels;
  std::vector<std::pair<uint64_t, const std::string*>> points;
  // The thread's name at its last sample (pthread_setname_np names, not the
  // process's).
  std::string comm;
  uint64_t comm_time = 0;
  ASSIGN_OR_RETURN(
      auto stats,
      analysis::Replay(
          hreader, ro, [&](const analysis::RecordInfo& i) { info = i; },
          [&](const analysis::ResolvedSample& rs) {
            auto it =
                labels.insert(rs.stack.empty() ? "[no frames]" : rs.stack[0]->Display()).first;
            ++top[*it];
            points.emplace_back(rs.sample->time_ns, &*it);
            if (rs.sample->time_ns >= comm_time) {
              comm_time = rs.sample->time_ns;
              comm = rs.sample->comm;
            }
          }));
  (void)stats;
  std::sort(points.begin(), points.end());
  const uint64_t total = points.size();
  const uint64_t first = total ? points.front().first : 0, last = total ? points.back().first : 0;
  std::vector<std::pair<uint64_t, std::string>> sorted;
  for (const auto& [f, n] : top) sorted.emplace_back(n, f);
  std::sort(sorted.begin(), sorted.end(), [](const auto& x, const auto& y) {
    return x.first != y.first ? x.first > y.first : x.second < y.second;
  });
  nlohmann::json tj = nlohmann::json::array();
  for (size_t i = 0; i < sorted.size() && i < 10; ++i) {
    tj.push_back({{"function", sorted[i].second},
                  {"samples", sorted[i].first},
                  {"pct", total ? 100.0 * sorted[i].first / total : 0}});
  }
  nlohmann::json lj = nlohmann::json::array();
  for (size_t i = total > 10 ? total - 10 : 0; i < total; ++i) {
    lj.push_back({{"time_ns", points[i].first}, {"function", *points[i].second}});
  }
  // The window the daemon froze (the last N seconds before it was asked);
  // the samples' own span when the record does not say.
  uint64_t start = info.window_start_ns, end = info.window_end_ns;
  if (start == 0 || end <= start) {
    start = first;
    end = last + 1;
  }
  const TimelineBins tb(start, end, bins);
  TimelineLane lane;
  for (const auto& [t, label] : points) tb.Add(&lane, t, *label);
  if (lane.bins.empty()) lane.bins.resize(tb.bins());
  const TimelineLegend legend({&lane});
  nlohmann::json legend_json = nlohmann::json::array();
  for (const auto& [label, n] : legend.order()) {
    legend_json.push_back(
        {{"letter", std::string(1, legend.Letter(label))}, {"function", label}, {"samples", n}});
  }
  return nlohmann::json{{"id", hid},
                        {"tid", tid},
                        {"comm", comm},
                        {"samples", total},
                        {"top", tj},
                        {"last", lj},
                        {"span_s", total ? (last - first) / 1e9 : 0.0},
                        {"first_ns", first},
                        {"last_ns", last},
                        {"window_start_ns", start},
                        {"window_end_ns", end},
                        {"window_s", (end - start) / 1e9},
                        // Where recorderd took it from: a crash marker (cut
                        // at the crash in kernel context) or its live rings.
                        {"source", json::Field(info.config, "history_source")},
                        {"end_mono_ns", info.window_end_ns},
                        {"timeline",
                         {{"bins", tb.bins()},
                          {"bin_ns", static_cast<uint64_t>(tb.width_ns())},
                          {"lane", tb.LaneJson(lane)},
                          {"text", legend.LaneText(lane)},
                          {"legend", legend_json}}}};
}

}  // namespace

Status PrintCrashInfo(const std::string& id, const nlohmann::json& meta,
                      const store::RecordReader& reader, const std::string& hid,
                      const store::RecordReader* hreader, std::string history_error, bool as_json,
                      bool show_maps, int bins) {
  using json::Array;
  using json::Field;
  using json::Get;
  using json::Object;
  using json::Str;
  // The crash's own sections: each is optional, and one that is not valid
  // JSON (or not an object) reads as empty rather than failing the command.
  const nlohmann::json crash = Object(meta, "crash");
  auto section_json = [&](const char* name) -> StatusOr<nlohmann::json> {
    if (!reader.FindSection(name)) return nlohmann::json::object();
    ASSIGN_OR_RETURN(std::string t, reader.ReadSection(name, kMaxCrashSectionBytes));
    auto j = json::ParseBounded(t);
    return j.is_object() ? j : nlohmann::json::object();
  };
  ASSIGN_OR_RETURN(nlohmann::json md, section_json("metadata"));
  ASSIGN_OR_RETURN(nlohmann::json bt, section_json("backtrace"));
  std::string maps;
  if (reader.FindSection("maps")) {
    ASSIGN_OR_RETURN(maps, reader.ReadSection("maps", kMaxCrashSectionBytes));
  }
  nlohmann::json history = nullptr;
  if (hreader != nullptr) {
    auto h = CrashHistory(*hreader, crash, hid, bins);
    if (h.ok()) {
      history = std::move(*h);
    } else {
      history_error = h.status().message();
    }
  }
  // Each backtrace thread is named from the metadata's /proc read at the
  // crash (by global tid), so a reader of the JSON need not join the two.
  std::map<int64_t, std::string> thread_names;
  for (const auto& t : Array(md, "threads")) {
    thread_names[Get<int64_t>(t, "tid", 0)] = json::RawText(t, "comm");
  }
  if (bt.contains("threads") && bt["threads"].is_array()) {
    for (auto& t : bt["threads"]) {
      if (!t.is_object()) continue;
      auto name = thread_names.find(Get<int64_t>(t, "tid", Get<int64_t>(t, "index", 0)));
      if (name != thread_names.end()) json::SetText(t, "comm", name->second);
    }
  }
  if (as_json) {
    nlohmann::json out = {{"id", id},        {"crash", crash},     {"metadata", md},
                          {"backtrace", bt}, {"history", history}, {"maps", maps}};
    if (!history_error.empty()) out["history_error"] = history_error;
    std::printf("%s\n", json::Dump(out, 2).c_str());
    return OkStatus();
  }
  // Everything below is text from the record: escaped for the terminal.
  auto E = [](const std::string& s) { return EscapeForTerminal(s); };
  std::printf("           ID: %s\n", E(id).c_str());
  const int64_t pid = Get<int64_t>(crash, "pid", 0), tid = Get<int64_t>(crash, "tid", 0);
  std::printf(
      "          PID: %lld (thread %lld; %lld in its pid namespace)\n", static_cast<long long>(pid),
      static_cast<long long>(Get<int64_t>(crash, "global_tid", tid)), static_cast<long long>(tid));
  std::printf("          UID: %lld  GID: %lld\n",
              static_cast<long long>(Get<int64_t>(crash, "uid", 0)),
              static_cast<long long>(Get<int64_t>(crash, "gid", 0)));
  std::printf("       Signal: %s\n", E(Str(crash, "signal_name")).c_str());
  std::printf("    Timestamp: %s\n", FormatTimeNs(Get<int64_t>(crash, "time_ns", 0)).c_str());
  // The process's exact bytes (`_hex` when they are not UTF-8), escaped.
  std::printf("   Executable: %s\n", E(json::RawText(crash, "exe")).c_str());
  std::printf(" Command Line: %s\n", E(json::RawText(md, "cmdline")).c_str());
  std::printf("          CWD: %s\n", E(json::RawText(md, "cwd")).c_str());
  std::printf("     Build-ID: %s\n", E(Str(md, "build_id")).c_str());
  std::printf("         Core: %s%s\n",
              Get<bool>(crash, "core_stored", false)
                  ? FormatBytes(Get<uint64_t>(crash, "core_size", 0)).c_str()
                  : "not stored",
              Get<bool>(crash, "truncated", false) ? " (truncated at the size limit)" : "");
  for (const auto& n : Array(crash, "notes")) {
    std::printf("         Note: %s\n", E(n.is_string() ? Str(n) : json::Dump(n)).c_str());
  }
  if (bt.contains("threads")) {
    std::printf("\nBacktrace (crashing thread first):\n");
    bool firstt = true;
    for (const auto& t : Array(bt, "threads")) {
      const int64_t ttid = Get<int64_t>(t, "tid", Get<int64_t>(t, "index", 0));
      auto name = thread_names.find(ttid);
      std::printf("  thread %lld%s%s:\n", static_cast<long long>(ttid),
                  name == thread_names.end() ? "" : (" " + E(name->second)).c_str(),
                  firstt ? " (crashed)" : "");
      PrintFrames(Array(t, "frames"), firstt ? 32 : 12);
      firstt = false;
    }
  } else {
    std::printf("\nBacktrace: none (%s)\n", E(Str(bt, "error", "see notes")).c_str());
  }
  if (!history.is_null()) {
    // Built by CrashHistory above: its shape is ours, its strings are not.
    const auto& h = history;
    std::printf(
        "\nHistory %s: %llu samples of thread %u%s in the %.2f s before the crash (spanning "
        "%.2f s)\n",
        E(Str(h, "id")).c_str(), static_cast<unsigned long long>(Get<uint64_t>(h, "samples", 0)),
        Get<uint32_t>(h, "tid", 0),
        Str(h, "comm").empty() ? "" : (" (" + E(Str(h, "comm")) + ")").c_str(),
        Get<double>(h, "window_s", 0), Get<double>(h, "span_s", 0));
    const nlohmann::json& source = Field(h, "source");
    if (Str(source, "kind") == "crash_marker") {
      std::printf("  from crash marker %llu, taken in the kernel as the core dump began",
                  static_cast<unsigned long long>(Get<uint64_t>(source, "marker_id", 0)));
      if (source.contains("crashing_thread_gap_ns")) {
        std::printf("; the thread's last sample %.3f ms before it",
                    Get<uint64_t>(source, "crashing_thread_gap_ns", 0) / 1e6);
      }
      std::printf("\n");
    } else if (source.is_object() && source.contains("crash_marker")) {
      std::printf("  from the live rings (%s)\n", E(Str(source, "crash_marker")).c_str());
    }
    std::printf("  top functions:\n");
    for (const auto& t : Array(h, "top")) {
      std::printf("  %6.2f%%  %s\n", Get<double>(t, "pct", 0), E(Str(t, "function")).c_str());
    }
    const auto& tl = Object(h, "timeline");
    std::printf(
        "  timeline (%d bins of %s, oldest left, the crash at the right; letter = what "
        "the thread ran most, . = not running):\n    |%s|\n",
        Get<int>(tl, "bins", 0),
        FormatDurationNs(static_cast<int64_t>(Get<uint64_t>(tl, "bin_ns", 0))).c_str(),
        E(Str(tl, "text")).c_str());
    for (const auto& l : Array(tl, "legend")) {
      std::printf("    %s  %s (%llu)\n", E(Str(l, "letter")).c_str(), E(Str(l, "function")).c_str(),
                  static_cast<unsigned long long>(Get<uint64_t>(l, "samples", 0)));
    }
    std::printf("  last samples:");
    for (const auto& l : Array(h, "last")) std::printf(" %s", E(Str(l, "function")).c_str());
    std::printf("\n  (recorder report %s --pid %lld, recorder timeline %s for more)\n",
                E(Str(h, "id")).c_str(), static_cast<long long>(pid), E(Str(h, "id")).c_str());
  } else {
    std::printf("\nHistory: none%s\n",
                history_error.empty() ? "" : (" (" + E(history_error) + ")").c_str());
  }
  if (show_maps) {
    std::printf("\nMappings (/proc/%lld/maps at the crash):\n", static_cast<long long>(pid));
    if (maps.empty()) {
      std::printf("  (not recorded)\n");
    } else {
      // Line by line: the newlines are the file's own, the rest is escaped.
      size_t pos = 0;
      while (pos < maps.size()) {
        size_t nl = maps.find('\n', pos);
        if (nl == std::string::npos) nl = maps.size();
        std::printf("%s\n", E(maps.substr(pos, nl - pos)).c_str());
        pos = nl + 1;
      }
    }
  }
  return OkStatus();
}

namespace {

Status RunCrashInfo(const CliContext& ctx, const CrashInfoArgs& args) {
  if (args.bins < 1 || args.bins > 1000) return InvalidArgument("--bins must be 1 to 1000");
  ASSIGN_OR_RETURN(auto found, OpenCrash(ctx, args.id));
  auto& [row, reader] = found;
  RETURN_IF_ERROR(CheckAccess(row.meta));
  const std::string hid = json::Str(json::Object(row.meta, "crash"), "history");
  std::unique_ptr<store::RecordReader> hreader;
  std::string history_error;
  if (!hid.empty()) {
    auto h = OpenHistory(ctx, hid);
    if (h.ok()) {
      hreader = std::move(*h);
    } else {
      history_error = h.status().message();
    }
  }
  return PrintCrashInfo(row.id, row.meta, *reader, hid, hreader.get(), history_error, args.json,
                        args.maps, args.bins);
}

// Writes the core of a crash to fd.
Status WriteCore(const CliContext& ctx, const std::string& id_arg, int fd, std::string* exe) {
  ASSIGN_OR_RETURN(auto found, OpenCrash(ctx, id_arg));
  auto& [row, reader] = found;
  const std::string id = row.id;
  RETURN_IF_ERROR(CheckAccess(row.meta));
  if (exe) *exe = json::Str(json::Object(row.meta, "crash"), "exe");
  if (!reader->FindSection("core")) {
    return NotFound(
        fmt::format("crash {} has no core stored ({})", id,
                    json::Get<bool>(json::Object(row.meta, "crash"), "rate_limited", false)
                        ? "rate limited"
                        : "see `recorder crash info`"));
  }
  ASSIGN_OR_RETURN(auto sec, reader->OpenSection("core"));
  std::vector<char> buf(1 << 20);
  for (;;) {
    ASSIGN_OR_RETURN(size_t n, sec->Read(buf.data(), buf.size()));
    if (n == 0) break;
    for (size_t off = 0; off < n;) {
      ssize_t w = write(fd, buf.data() + off, n - off);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return ErrnoStatus("writing the core");
      off += static_cast<size_t>(w);
    }
  }
  return OkStatus();
}

// Writes the core to `out`: into a new file of an unpredictable name next to
// it (O_EXCL, mode 0600: a core holds the process's memory), renamed into
// place when complete.
Status ExtractCore(const CliContext& ctx, const std::string& id_arg, const std::string& out) {
  std::string tmpl = out + ".tmp-XXXXXX";
  ScopedFd fd(mkostemp(tmpl.data(), O_CLOEXEC));
  if (!fd) return ErrnoStatus("cannot write " + out);
  Status st = WriteCore(ctx, id_arg, fd.get(), nullptr);
  if (st.ok() && fsync(fd.get()) != 0) st = ErrnoStatus("writing " + out);
  if (st.ok() && rename(tmpl.c_str(), out.c_str()) != 0) st = ErrnoStatus("writing " + out);
  if (!st.ok()) unlink(tmpl.c_str());
  return st;
}

Status RunCrashCore(const CliContext& ctx, const std::string& id, const std::string& out,
                    bool as_json) {
  RETURN_IF_ERROR(ExtractCore(ctx, id, out));
  if (as_json) {
    struct stat st {};
    uint64_t bytes = stat(out.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
    std::printf(
        "%s\n",
        json::Dump(nlohmann::json{{"crash", id}, {"output", out}, {"bytes", bytes}}, 2).c_str());
    return OkStatus();
  }
  std::fprintf(stderr, "wrote the core of %s to %s\n", EscapeForTerminal(id).c_str(),
               EscapeForTerminal(out).c_str());
  return OkStatus();
}

// Splits ARGS like a shell would (quotes and backslashes), as coredumpctl's
// --debugger-arguments does.
StatusOr<std::vector<std::string>> SplitArgs(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (quote) {
      if (c == quote) {
        quote = 0;
      } else if (c == '\\' && quote == '"' && i + 1 < s.size()) {
        cur += s[++i];
      } else {
        cur += c;
      }
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == '\\' && i + 1 < s.size()) {
      cur += s[++i];
      in_word = true;
    } else if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) out.push_back(std::move(cur));
      cur.clear();
      in_word = false;
    } else {
      cur += c;
      in_word = true;
    }
  }
  if (quote) return InvalidArgument("unterminated quote in --debugger-arguments");
  if (in_word) out.push_back(std::move(cur));
  return out;
}

// Runs gdb on the executable and the core, decompressed into a private
// directory (mkdtemp, 0700; the file created O_EXCL|O_NOFOLLOW) that is
// removed when gdb exits.
Status RunCrashDebug(const CliContext& ctx, const std::string& id, const std::string& gdb_args,
                     bool as_json) {
  ASSIGN_OR_RETURN(auto extra, SplitArgs(gdb_args));
  const char* tmpdir = getenv("TMPDIR");
  // Cores are large: /var/tmp rather than a RAM-backed /tmp, as coredumpctl.
  std::string dir =
      std::string(tmpdir && *tmpdir ? tmpdir : "/var/tmp") + "/flightrec-debug-XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) return ErrnoStatus("creating a directory for the core");
  const std::string core = dir + "/core";
  std::string exe;
  Status st;
  {
    ScopedFd fd(open(core.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    st = fd ? WriteCore(ctx, id, fd.get(), &exe) : ErrnoStatus("creating " + core);
  }
  int gdb_status = 0;
  if (st.ok()) {
    std::fprintf(stderr, "core extracted to %s (removed when gdb exits)\n", core.c_str());
    std::fflush(stderr);
    std::vector<std::string> argv = {"gdb"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.push_back(exe);
    argv.push_back(core);
    // gdb owns the terminal meanwhile: ^C is for it, not for us (the
    // directory must still be removed).
    struct sigaction ign {
    }, old_int{}, old_quit{};
    ign.sa_handler = SIG_IGN;
    sigaction(SIGINT, &ign, &old_int);
    sigaction(SIGQUIT, &ign, &old_quit);
    pid_t pid = fork();
    if (pid == 0) {
      sigaction(SIGINT, &old_int, nullptr);
      sigaction(SIGQUIT, &old_quit, nullptr);
      std::vector<char*> cargv;
      for (auto& a : argv) cargv.push_back(a.data());
      cargv.push_back(nullptr);
      execvp("gdb", cargv.data());
      std::fprintf(stderr, "recorder: cannot run gdb: %s\n", std::strerror(errno));
      _exit(127);
    }
    if (pid < 0) {
      st = ErrnoStatus("fork");
    } else {
      while (waitpid(pid, &gdb_status, 0) < 0 && errno == EINTR) {
      }
    }
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGQUIT, &old_quit, nullptr);
  }
  unlink(core.c_str());
  rmdir(dir.c_str());
  RETURN_IF_ERROR(st);
  if (as_json) {
    // After gdb's own output: how the session ended, for scripts that run
    // gdb in batch mode (-A "-batch -ex bt").
    nlohmann::json out = {{"crash", id}, {"exe", exe}};
    if (WIFEXITED(gdb_status)) out["gdb_exit_status"] = WEXITSTATUS(gdb_status);
    if (WIFSIGNALED(gdb_status)) out["gdb_signal"] = WTERMSIG(gdb_status);
    std::printf("%s\n", json::Dump(out, 2).c_str());
  }
  if (!WIFEXITED(gdb_status) || WEXITSTATUS(gdb_status) != 0) {
    return Internal(WIFEXITED(gdb_status)
                        ? fmt::format("gdb exited with status {}", WEXITSTATUS(gdb_status))
                        : fmt::format("gdb died from signal {}", WTERMSIG(gdb_status)));
  }
  return OkStatus();
}

// ------------------------------------------------- coredump install/uninstall

constexpr const char* kPattern = "/proc/sys/kernel/core_pattern";
constexpr const char* kPipeLimit = "/proc/sys/kernel/core_pipe_limit";
constexpr const char* kSysctlDropIn = "/etc/sysctl.d/50-flightrec-coredump.conf";

StatusOr<std::string> ReadLine(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  if (!std::getline(in, s)) return ErrnoStatus("reading " + path);
  return s;
}
Status WriteLine(const std::string& path, const std::string& v) {
  std::ofstream out(path);
  if (!(out << v << "\n") || !out.flush()) return ErrnoStatus("writing " + path);
  return OkStatus();
}

std::string DefaultHookPath() {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path();
  for (const auto& c :
       {self / "recorder-coredump", self / "../../coredump-hook/recorder-coredump"}) {
    if (std::filesystem::exists(c, ec)) return std::filesystem::weakly_canonical(c, ec).string();
  }
  return "/usr/local/bin/recorder-coredump";
}

Status RunInstall(const CliContext& ctx, std::string hook, bool persist, bool as_json) {
  if (geteuid() != 0) return Status(StatusCode::kPermissionDenied, "coredump install needs root");
  if (hook.empty()) hook = DefaultHookPath();
  if (access(hook.c_str(), X_OK) != 0) return ErrnoStatus("hook " + hook + " is not executable");
  ASSIGN_OR_RETURN(std::string old_pattern, ReadLine(kPattern));
  ASSIGN_OR_RETURN(std::string old_limit, ReadLine(kPipeLimit));
  ASSIGN_OR_RETURN(std::string pattern, coredump::CorePattern(hook));
  coredump::HookOptions ho;
  ho.store_dir = ctx.store_dir;
  ho.socket_path = ctx.socket_path;
  RETURN_IF_ERROR(coredump::WriteHookConfig(ho));
  std::filesystem::create_directories(ctx.store_dir);
  // Users read their own crashes through per-file ACLs the hook sets, found
  // through by-uid/<uid>/: the store is searchable by others but not listable
  // (the names are every user's record ids), the index (everyone's metadata)
  // root's.
  chmod(ctx.store_dir.c_str(), 0711);
  for (const char* f : {"/index.sqlite", "/index.sqlite-wal", "/index.sqlite-shm"}) {
    chmod((ctx.store_dir + f).c_str(), 0600);
  }
  std::string saved = ctx.store_dir + "/core_pattern.saved";
  // Keep the pattern from before the first install, not our own.
  if (old_pattern.find("recorder-coredump") == std::string::npos) {
    std::ofstream s(saved, std::ios::trunc);
    s << nlohmann::json{{"core_pattern", old_pattern}, {"core_pipe_limit", old_limit}}.dump();
    if (!s.flush()) return ErrnoStatus("writing " + saved);
  }
  // core_pipe_limit > 0 keeps the crashing process until the hook has read
  // its /proc entries; crashes beyond it at once are skipped by the kernel,
  // so it is set high enough for a storm (the hook rate-limits cores).
  RETURN_IF_ERROR(WriteLine(kPipeLimit, "64"));
  RETURN_IF_ERROR(WriteLine(kPattern, pattern));
  if (persist) {
    std::ofstream d(kSysctlDropIn, std::ios::trunc);
    d << "# written by `recorder coredump install --persist`\nkernel.core_pattern=" << pattern
      << "\nkernel.core_pipe_limit=64\n";
    if (!d.flush()) return ErrnoStatus(std::string("writing ") + kSysctlDropIn);
  }
  if (as_json) {
    std::printf("%s\n", json::Dump(nlohmann::json{{"core_pattern", pattern},
                                                  {"previous", old_pattern},
                                                  {"saved", saved},
                                                  {"store", ctx.store_dir},
                                                  {"persist", persist}},
                                   2)
                            .c_str());
    return OkStatus();
  }
  std::printf("core_pattern: %s\n(previous: %s, saved in %s)\n", pattern.c_str(),
              EscapeForTerminal(old_pattern).c_str(), saved.c_str());
  return OkStatus();
}

Status RunUninstall(const CliContext& ctx, bool as_json) {
  if (geteuid() != 0) return Status(StatusCode::kPermissionDenied, "coredump uninstall needs root");
  std::string saved = ctx.store_dir + "/core_pattern.saved";
  std::ifstream s(saved);
  auto j = nlohmann::json::parse(s, nullptr, false);
  if (j.is_discarded()) {
    return NotFound("no saved core_pattern in " + saved +
                    " (was `coredump install` run with this --store?)");
  }
  RETURN_IF_ERROR(WriteLine(kPattern, json::Str(j, "core_pattern", "core")));
  RETURN_IF_ERROR(WriteLine(kPipeLimit, json::Str(j, "core_pipe_limit", "0")));
  std::error_code ec;
  std::filesystem::remove(kSysctlDropIn, ec);
  std::filesystem::remove(saved, ec);
  std::filesystem::remove(coredump::kHookConfig, ec);
  if (as_json) {
    std::printf(
        "%s\n",
        json::Dump(nlohmann::json{{"core_pattern", json::Str(j, "core_pattern", "core")},
                                  {"core_pipe_limit", json::Str(j, "core_pipe_limit", "0")}},
                   2)
            .c_str());
    return OkStatus();
  }
  std::printf("core_pattern restored: %s\n",
              EscapeForTerminal(json::Str(j, "core_pattern", "core")).c_str());
  return OkStatus();
}

}  // namespace

Status ExerciseCrashCommands(const store::RecordReader& reader, int pick) {
  const auto& h = reader.header();
  // The list is cheap (no replay): always both forms.
  RETURN_IF_ERROR(PrintCrashList({{h.id, h.created_ns, reader.file_size(), reader.meta()}}, false));
  RETURN_IF_ERROR(PrintCrashList({{h.id, h.created_ns, reader.file_size(), reader.meta()}}, true));
  Status first;
  for (bool as_json : {false, true}) {
    if (pick >= 0 && as_json != (pick % 2 == 1)) continue;
    // The record is its own history: a crash record's sections and a
    // history's events are decoded from the same bytes.
    Status st = PrintCrashInfo(h.id, reader.meta(), reader, h.id, &reader, "", as_json,
                               /*show_maps=*/true, /*bins=*/20);
    if (first.ok() && !st.ok()) first = st;
  }
  return first;
}

void AddCrashCommands(CLI::App& app, CliContext& ctx) {
  auto* crash =
      app.add_subcommand("crash", "Stored crashes: cores with their history (like coredumpctl)");
  crash->require_subcommand(1);
  auto la = std::make_shared<CrashListArgs>();
  auto* list = crash->add_subcommand("list", "Crashes in the store, oldest first");
  list->add_flag("-1", la->newest, "Only the newest");
  list->add_option("--since", la->since, "Only crashes at or after T");
  list->add_option("--pid", la->pid, "Only this process id");
  list->add_option("--exe", la->exe, "Only this executable path");
  list->add_flag("--json", la->json, "Machine-readable output");
  list->callback([&ctx, la] { ctx.action = [&ctx, la] { return RunCrashList(ctx, *la); }; });

  auto ia = std::make_shared<CrashInfoArgs>();
  auto* info = crash->add_subcommand(
      "info",
      "Metadata, backtrace of each thread, and the crashing thread's last seconds (top "
      "functions, timeline)");
  info->add_option("ID", ia->id, "Crash id, any unique part of it, or -1 for the newest")
      ->required();
  info->add_flag("--json", ia->json, "Machine-readable output (includes the mappings)");
  info->add_flag("--maps", ia->maps, "Also print /proc/PID/maps as it was at the crash");
  info->add_option("--bins", ia->bins, "Time bins of the history timeline")->capture_default_str();
  info->callback([&ctx, ia] { ctx.action = [&ctx, ia] { return RunCrashInfo(ctx, *ia); }; });

  auto cid = std::make_shared<std::string>();
  auto cout = std::make_shared<std::string>();
  auto cjson = std::make_shared<bool>(false);
  auto* core = crash->add_subcommand("core", "Write a crash's core file, decompressed");
  core->add_option("ID", *cid, "Crash id, any unique part of it, or -1")->required();
  core->add_option("-o,--output", *cout, "Output file")->required();
  core->add_flag("--json", *cjson, "Machine-readable output (the file written and its size)");
  core->callback([&ctx, cid, cout, cjson] {
    ctx.action = [&ctx, cid, cout, cjson] { return RunCrashCore(ctx, *cid, *cout, *cjson); };
  });

  auto did = std::make_shared<std::string>();
  auto dargs = std::make_shared<std::string>();
  auto* debug = crash->add_subcommand(
      "debug",
      "Start gdb on the executable and the core (decompressed to a private directory "
      "under $TMPDIR or /var/tmp, removed when gdb exits)");
  debug->add_option("ID", *did, "Crash id, any unique part of it, or -1")->required();
  debug->add_option("-A,--debugger-arguments", *dargs,
                    "Extra gdb arguments, split like a shell would, e.g. "
                    "\"-batch -ex 'thread apply all bt'\"");
  auto djson = std::make_shared<bool>(false);
  debug->add_flag("--json", *djson, "After gdb exits, print how it ended as JSON");
  debug->callback([&ctx, did, dargs, djson] {
    ctx.action = [&ctx, did, dargs, djson] { return RunCrashDebug(ctx, *did, *dargs, *djson); };
  });

  auto* cd = app.add_subcommand("coredump", "Install or remove the core_pattern handler");
  cd->require_subcommand(1);
  auto hook = std::make_shared<std::string>();
  auto persist = std::make_shared<bool>(false);
  auto* inst = cd->add_subcommand(
      "install", "Make recorder-coredump the kernel's core handler (saves the previous pattern)");
  inst->add_option("--hook", *hook, "Path of recorder-coredump (default: next to recorder)");
  inst->add_flag("--persist", *persist, "Also write " + std::string(kSysctlDropIn));
  auto ijson = std::make_shared<bool>(false);
  inst->add_flag("--json", *ijson, "Machine-readable output");
  inst->callback([&ctx, hook, persist, ijson] {
    ctx.action = [&ctx, hook, persist, ijson] { return RunInstall(ctx, *hook, *persist, *ijson); };
  });
  auto ujson = std::make_shared<bool>(false);
  auto* un = cd->add_subcommand("uninstall", "Restore the core_pattern saved by install");
  un->add_flag("--json", *ujson, "Machine-readable output");
  un->callback([&ctx, ujson] { ctx.action = [&ctx, ujson] { return RunUninstall(ctx, *ujson); }; });
}

}  // namespace flightrec::recorder::cli
