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

#include "common/scoped_fd.h"
#include "common/units.h"
#include "coredump-hook/coredump.h"
#include "recorder/analysis/replay.h"
#include "recorder/cli/cli.h"
#include "recorder/cli/timeline.h"

namespace flightrec::recorder::cli {
namespace {

// Crashes a user may see: root sees all; others see their own processes'
// crashes, and never those of non-dumpable processes (setuid & co).
std::optional<uint32_t> VisibleUid() {
  if (geteuid() == 0) return std::nullopt;
  return static_cast<uint32_t>(getuid());
}

Status CheckAccess(const nlohmann::json& meta) {
  auto uid = VisibleUid();
  if (!uid) return OkStatus();
  const auto& c = meta.value("crash", nlohmann::json::object());
  if (c.value("uid", uint32_t{UINT32_MAX}) != *uid || !c.value("dumpable", true)) {
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
  std::error_code ec;
  std::filesystem::directory_iterator it(ctx.store_dir, ec);
  if (ec) return ErrnoStatus(ec.value(), "cannot read the store " + ctx.store_dir);
  for (const auto& e : it) {
    if (e.path().extension() != ".frec") continue;
    auto reader = store::RecordReader::Open(e.path().string());
    if (!reader.ok()) continue;  // another user's, or root's
    const auto& meta = (*reader)->meta();
    const auto& c = meta.value("crash", nlohmann::json::object());
    if ((*reader)->header().kind != "crash" || c.value("uid", UINT32_MAX) != *VisibleUid())
      continue;
    if (q.pid && c.value("pid", 0u) != *q.pid) continue;
    if (q.exe && c.value("exe", "") != *q.exe) continue;
    if (q.since_ns && (*reader)->header().created_ns < *q.since_ns) continue;
    out.push_back(
        {(*reader)->header().id, (*reader)->header().created_ns, (*reader)->file_size(), meta});
  }
  std::sort(out.begin(), out.end(),
            [](const CrashRow& a, const CrashRow& b) { return a.created_ns < b.created_ns; });
  return out;
}

// The crash for an id, unique prefix or -1, with its reader.
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
  const CrashRow* found = nullptr;
  for (const auto& r : rows) {
    if (id == "-1" || r.id.rfind(id, 0) == 0) found = &r;
  }
  if (found == nullptr) {
    return Status(StatusCode::kNotFound,
                  fmt::format("no crash {} of yours (other users' crashes are not shown)", id));
  }
  for (const auto& e : std::filesystem::directory_iterator(ctx.store_dir)) {
    if (e.path().filename().string().rfind(found->id, 0) == 0) {
      ASSIGN_OR_RETURN(auto reader, store::RecordReader::Open(e.path().string()));
      return std::make_pair(*found, std::move(reader));
    }
  }
  return NotFound("record file of " + found->id + " is gone");
}

// The history record linked to a crash (root: through the store; others:
// the file the hook made readable to them).
StatusOr<std::unique_ptr<store::RecordReader>> OpenHistory(const CliContext& ctx,
                                                           const std::string& hid) {
  if (!VisibleUid()) {
    ASSIGN_OR_RETURN(auto store, ctx.OpenStore());
    return store->OpenRecord(hid);
  }
  for (const auto& e : std::filesystem::directory_iterator(ctx.store_dir)) {
    if (e.path().filename().string().rfind(hid, 0) == 0) {
      return store::RecordReader::Open(e.path().string());
    }
  }
  return NotFound("history record " + hid + " is gone");
}

struct CrashListArgs {
  bool newest = false;
  bool json = false;
  std::string since;
  int64_t pid = -1;
  std::string exe;
};

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
  if (a.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : rows) {
      nlohmann::json c = r.meta.value("crash", nlohmann::json::object());
      c["id"] = r.id;
      c["created_ns"] = r.created_ns;
      c["stored_bytes"] = r.file_size;
      out.push_back(std::move(c));
    }
    std::printf("%s\n", out.dump(2).c_str());
    return OkStatus();
  }
  std::vector<std::vector<std::string>> table;
  for (const auto& r : rows) {
    const auto& c = r.meta.value("crash", nlohmann::json::object());
    std::string core = c.value("core_stored", false)
                           ? FormatBytes(c.value("core_size", uint64_t{0})) +
                                 (c.value("truncated", false) ? " (truncated)" : "")
                           : "none";
    table.push_back({r.id, FormatTimeNs(r.created_ns), std::to_string(c.value("pid", 0)),
                     std::to_string(c.value("uid", 0)), c.value("signal_name", ""),
                     c.value("exe", ""), core,
                     c.value("history", "").empty() ? "-" : c.value("history", "")});
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
    std::string fn = f.value("function", "");
    if (fn.empty()) fn = fmt::format("{}+0x{:x}", f.value("dso", "?"), f.value("offset", 0ull));
    std::string where =
        f.contains("file") ? fmt::format(" at {}:{}", f.value("file", ""), f.value("line", 0)) : "";
    std::printf("    #%-2zu 0x%016llx %s%s (%s)%s\n", n, f.value("ip", 0ull), fn.c_str(),
                f.value("inlined", false) ? " [inlined]" : "", f.value("dso", "").c_str(),
                where.c_str());
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
  ro.pid = crash.value("pid", 0u);
  const uint32_t tid = crash.value("global_tid", crash.value("tid", 0u));
  if (tid != 0) ro.tid = tid;
  ro.progress = false;
  analysis::RecordInfo info;
  std::map<std::string, uint64_t> top;
  std::set<std::string> labels;
  std::vector<std::pair<uint64_t, const std::string*>> points;
  ASSIGN_OR_RETURN(
      auto stats,
      analysis::Replay(
          hreader, ro, [&](const analysis::RecordInfo& i) { info = i; },
          [&](const analysis::ResolvedSample& rs) {
            auto it =
                labels.insert(rs.stack.empty() ? "[no frames]" : rs.stack[0]->Display()).first;
            ++top[*it];
            points.emplace_back(rs.sample->time_ns, &*it);
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
                        {"source", info.config.value("history_source", nlohmann::json())},
                        {"end_mono_ns", info.window_end_ns},
                        {"timeline",
                         {{"bins", tb.bins()},
                          {"bin_ns", static_cast<uint64_t>(tb.width_ns())},
                          {"lane", tb.LaneJson(lane)},
                          {"text", legend.LaneText(lane)},
                          {"legend", legend_json}}}};
}

Status RunCrashInfo(const CliContext& ctx, const CrashInfoArgs& args) {
  if (args.bins < 1 || args.bins > 1000) return InvalidArgument("--bins must be 1 to 1000");
  ASSIGN_OR_RETURN(auto found, OpenCrash(ctx, args.id));
  auto& [row, reader] = found;
  const std::string id = row.id;
  RETURN_IF_ERROR(CheckAccess(row.meta));
  nlohmann::json crash = row.meta.value("crash", nlohmann::json::object());
  nlohmann::json md = nlohmann::json::object(), bt = nlohmann::json::object();
  std::string maps;
  if (reader->FindSection("metadata")) {
    ASSIGN_OR_RETURN(std::string t, reader->ReadSection("metadata"));
    md = nlohmann::json::parse(t, nullptr, false);
  }
  if (reader->FindSection("backtrace")) {
    ASSIGN_OR_RETURN(std::string t, reader->ReadSection("backtrace"));
    bt = nlohmann::json::parse(t, nullptr, false);
  }
  if (reader->FindSection("maps")) {
    ASSIGN_OR_RETURN(maps, reader->ReadSection("maps"));
  }
  nlohmann::json history = nullptr;
  std::string history_error;
  if (std::string hid = crash.value("history", ""); !hid.empty()) {
    auto hreader = OpenHistory(ctx, hid);
    if (!hreader.ok()) {
      history_error = hreader.status().message();
    } else {
      auto h = CrashHistory(**hreader, crash, hid, args.bins);
      if (h.ok()) {
        history = std::move(*h);
      } else {
        history_error = h.status().message();
      }
    }
  }
  if (args.json) {
    nlohmann::json out = {{"id", id},        {"crash", crash},     {"metadata", md},
                          {"backtrace", bt}, {"history", history}, {"maps", maps}};
    if (!history_error.empty()) out["history_error"] = history_error;
    std::printf("%s\n", out.dump(2).c_str());
    return OkStatus();
  }
  std::printf("           ID: %s\n", id.c_str());
  std::printf("          PID: %d (thread %d; %d in its pid namespace)\n", crash.value("pid", 0),
              crash.value("global_tid", crash.value("tid", 0)), crash.value("tid", 0));
  std::printf("          UID: %d  GID: %d\n", crash.value("uid", 0), crash.value("gid", 0));
  std::printf("       Signal: %s\n", crash.value("signal_name", "").c_str());
  std::printf("    Timestamp: %s\n", FormatTimeNs(crash.value("time_ns", int64_t{0})).c_str());
  std::printf("   Executable: %s\n", crash.value("exe", "").c_str());
  std::printf(" Command Line: %s\n", md.value("cmdline", "").c_str());
  std::printf("          CWD: %s\n", md.value("cwd", "").c_str());
  std::printf("     Build-ID: %s\n", md.value("build_id", "").c_str());
  std::printf("         Core: %s%s\n",
              crash.value("core_stored", false)
                  ? FormatBytes(crash.value("core_size", uint64_t{0})).c_str()
                  : "not stored",
              crash.value("truncated", false) ? " (truncated at the size limit)" : "");
  for (const auto& n : crash.value("notes", nlohmann::json::array())) {
    std::printf("         Note: %s\n", n.get<std::string>().c_str());
  }
  if (bt.contains("threads")) {
    std::printf("\nBacktrace (crashing thread first):\n");
    bool firstt = true;
    for (const auto& t : bt["threads"]) {
      std::printf("  thread %d%s:\n", t.value("tid", t.value("index", 0)),
                  firstt ? " (crashed)" : "");
      PrintFrames(t.value("frames", nlohmann::json::array()), firstt ? 32 : 12);
      firstt = false;
    }
  } else {
    std::printf("\nBacktrace: none (%s)\n", bt.value("error", "see notes").c_str());
  }
  if (!history.is_null()) {
    const auto& h = history;
    std::printf(
        "\nHistory %s: %llu samples of thread %u in the %.2f s before the crash (spanning %.2f "
        "s)\n",
        h["id"].get<std::string>().c_str(),
        static_cast<unsigned long long>(h["samples"].get<uint64_t>()), h["tid"].get<uint32_t>(),
        h["window_s"].get<double>(), h["span_s"].get<double>());
    const nlohmann::json source = history.value("source", nlohmann::json());
    if (source.is_object() && source.value("kind", "") == "crash_marker") {
      std::printf("  from crash marker %llu, taken in the kernel as the core dump began",
                  static_cast<unsigned long long>(source.value("marker_id", uint64_t{0})));
      if (source.contains("crashing_thread_gap_ns")) {
        std::printf("; the thread's last sample %.3f ms before it",
                    source["crashing_thread_gap_ns"].get<uint64_t>() / 1e6);
      }
      std::printf("\n");
    } else if (source.is_object() && source.contains("crash_marker")) {
      std::printf("  from the live rings (%s)\n",
                  source["crash_marker"].get<std::string>().c_str());
    }
    std::printf("  top functions:\n");
    for (const auto& t : h["top"]) {
      std::printf("  %6.2f%%  %s\n", t["pct"].get<double>(),
                  t["function"].get<std::string>().c_str());
    }
    const auto& tl = h["timeline"];
    std::printf(
        "  timeline (%d bins of %s, oldest left, the crash at the right; letter = what "
        "the thread ran most, . = not running):\n    |%s|\n",
        tl["bins"].get<int>(),
        FormatDurationNs(static_cast<int64_t>(tl["bin_ns"].get<uint64_t>())).c_str(),
        tl["text"].get<std::string>().c_str());
    for (const auto& l : tl["legend"]) {
      std::printf("    %s  %s (%llu)\n", l["letter"].get<std::string>().c_str(),
                  l["function"].get<std::string>().c_str(),
                  static_cast<unsigned long long>(l["samples"].get<uint64_t>()));
    }
    std::printf("  last samples:");
    for (const auto& l : h["last"]) std::printf(" %s", l["function"].get<std::string>().c_str());
    std::printf("\n  (recorder report %s --pid %d, recorder timeline %s for more)\n",
                h["id"].get<std::string>().c_str(), crash.value("pid", 0),
                h["id"].get<std::string>().c_str());
  } else {
    std::printf("\nHistory: none%s\n",
                history_error.empty() ? "" : (" (" + history_error + ")").c_str());
  }
  if (args.maps) {
    std::printf("\nMappings (/proc/%d/maps at the crash):\n%s", crash.value("pid", 0),
                maps.empty() ? "  (not recorded)\n" : maps.c_str());
  }
  return OkStatus();
}

// Writes the core of a crash to fd.
Status WriteCore(const CliContext& ctx, const std::string& id_arg, int fd, std::string* exe) {
  ASSIGN_OR_RETURN(auto found, OpenCrash(ctx, id_arg));
  auto& [row, reader] = found;
  const std::string id = row.id;
  RETURN_IF_ERROR(CheckAccess(row.meta));
  if (exe) *exe = row.meta.value("crash", nlohmann::json::object()).value("exe", "");
  if (!reader->FindSection("core")) {
    return NotFound(
        fmt::format("crash {} has no core stored ({})", id,
                    row.meta.value("crash", nlohmann::json::object()).value("rate_limited", false)
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

Status RunCrashCore(const CliContext& ctx, const std::string& id, const std::string& out) {
  RETURN_IF_ERROR(ExtractCore(ctx, id, out));
  std::fprintf(stderr, "wrote the core of %s to %s\n", id.c_str(), out.c_str());
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
Status RunCrashDebug(const CliContext& ctx, const std::string& id, const std::string& gdb_args) {
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

Status RunInstall(const CliContext& ctx, std::string hook, bool persist) {
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
  // Users read their own crashes through per-file ACLs the hook sets: the
  // store must be traversable, and the index (everyone's metadata) root's.
  chmod(ctx.store_dir.c_str(), 0755);
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
  std::printf("core_pattern: %s\n(previous: %s, saved in %s)\n", pattern.c_str(),
              old_pattern.c_str(), saved.c_str());
  return OkStatus();
}

Status RunUninstall(const CliContext& ctx) {
  if (geteuid() != 0) return Status(StatusCode::kPermissionDenied, "coredump uninstall needs root");
  std::string saved = ctx.store_dir + "/core_pattern.saved";
  std::ifstream s(saved);
  auto j = nlohmann::json::parse(s, nullptr, false);
  if (j.is_discarded()) {
    return NotFound("no saved core_pattern in " + saved +
                    " (was `coredump install` run with this --store?)");
  }
  RETURN_IF_ERROR(WriteLine(kPattern, j.value("core_pattern", "core")));
  RETURN_IF_ERROR(WriteLine(kPipeLimit, j.value("core_pipe_limit", "0")));
  std::error_code ec;
  std::filesystem::remove(kSysctlDropIn, ec);
  std::filesystem::remove(saved, ec);
  std::filesystem::remove(coredump::kHookConfig, ec);
  std::printf("core_pattern restored: %s\n", j.value("core_pattern", "core").c_str());
  return OkStatus();
}

}  // namespace

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
  info->add_option("ID", ia->id, "Crash id, unique prefix, or -1 for the newest")->required();
  info->add_flag("--json", ia->json, "Machine-readable output (includes the mappings)");
  info->add_flag("--maps", ia->maps, "Also print /proc/PID/maps as it was at the crash");
  info->add_option("--bins", ia->bins, "Time bins of the history timeline")->capture_default_str();
  info->callback([&ctx, ia] { ctx.action = [&ctx, ia] { return RunCrashInfo(ctx, *ia); }; });

  auto cid = std::make_shared<std::string>();
  auto cout = std::make_shared<std::string>();
  auto* core = crash->add_subcommand("core", "Write a crash's core file, decompressed");
  core->add_option("ID", *cid, "Crash id, unique prefix, or -1")->required();
  core->add_option("-o,--output", *cout, "Output file")->required();
  core->callback([&ctx, cid, cout] {
    ctx.action = [&ctx, cid, cout] { return RunCrashCore(ctx, *cid, *cout); };
  });

  auto did = std::make_shared<std::string>();
  auto dargs = std::make_shared<std::string>();
  auto* debug = crash->add_subcommand(
      "debug",
      "Start gdb on the executable and the core (decompressed to a private directory "
      "under $TMPDIR or /var/tmp, removed when gdb exits)");
  debug->add_option("ID", *did, "Crash id, unique prefix, or -1")->required();
  debug->add_option("-A,--debugger-arguments", *dargs,
                    "Extra gdb arguments, split like a shell would, e.g. "
                    "\"-batch -ex 'thread apply all bt'\"");
  debug->callback([&ctx, did, dargs] {
    ctx.action = [&ctx, did, dargs] { return RunCrashDebug(ctx, *did, *dargs); };
  });

  auto* cd = app.add_subcommand("coredump", "Install or remove the core_pattern handler");
  cd->require_subcommand(1);
  auto hook = std::make_shared<std::string>();
  auto persist = std::make_shared<bool>(false);
  auto* inst = cd->add_subcommand(
      "install", "Make recorder-coredump the kernel's core handler (saves the previous pattern)");
  inst->add_option("--hook", *hook, "Path of recorder-coredump (default: next to recorder)");
  inst->add_flag("--persist", *persist, "Also write " + std::string(kSysctlDropIn));
  inst->callback([&ctx, hook, persist] {
    ctx.action = [&ctx, hook, persist] { return RunInstall(ctx, *hook, *persist); };
  });
  auto* un = cd->add_subcommand("uninstall", "Restore the core_pattern saved by install");
  un->callback([&ctx] { ctx.action = [&ctx] { return RunUninstall(ctx); }; });
}

}  // namespace flightrec::recorder::cli
