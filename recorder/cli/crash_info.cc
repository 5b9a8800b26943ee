// recorder crash info: the crash's metadata, each thread's backtrace and the
// crashing thread's last seconds (analysis::CrashHistory). Everything printed
// comes from a record: escaped for the terminal.
#include <cstdio>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/checked_json.h"
#include "common/terminal_escape.h"
#include "common/units.h"
#include "recorder/analysis/crash_history.h"
#include "recorder/cli/crash_internal.h"
#include "recorder/cli/panic_info.h"
#include "recorder/record/crash_record.h"
#include "recorder/record/mem_growth_section.h"
#include "recorder/record/sections.h"

namespace flightrec::recorder::cli {
namespace {

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

// The mutexes the process's threads still waited for, their owners, and
// any wait-for cycle (analysis::LockGraph's JSON, built from the record).
void PrintLocks(const nlohmann::json& h) {
  if (h.contains("locks_error")) {
    std::printf("  lock owners: unreadable (%s)\n",
                EscapeForTerminal(json::Str(h, "locks_error")).c_str());
    return;
  }
  const nlohmann::json& locks = json::Object(h, "locks");
  if (json::Array(locks, "waits").empty()) return;
  std::printf("  mutexes waited for at the end (owners read from the live process):\n");
  auto who = [](const nlohmann::json& w, const char* tid, const char* comm) {
    const std::string c = json::Str(w, comm);
    return fmt::format("{}{}", json::Get<uint32_t>(w, tid, 0),
                       c.empty() ? "" : " (" + EscapeForTerminal(c) + ")");
  };
  // A terminal's worth; --json has them all.
  constexpr size_t kMaxShown = 32;
  const auto& waits = json::Array(locks, "waits");
  for (size_t i = 0; i < waits.size() && i < kMaxShown; ++i) {
    const auto& w = waits[i];
    const uint32_t owner = json::Get<uint32_t>(w, "owner", 0);
    std::printf("    %s waits for mutex %s, %s\n", who(w, "tid", "comm").c_str(),
                EscapeForTerminal(json::Str(w, "mutex")).c_str(),
                owner == 0 ? "which named no owner"
                : json::Get<bool>(w, "owner_in_process", false)
                    ? ("held by " + who(w, "owner", "owner_comm")).c_str()
                    : fmt::format("held by {} (not a thread of this process)", owner).c_str());
  }
  if (waits.size() > kMaxShown)
    std::printf("    ... %zu more (--json)\n", waits.size() - kMaxShown);
  for (const auto& d : json::Array(locks, "deadlocks")) {
    std::printf("  %s\n", EscapeForTerminal(json::Str(d, "text")).c_str());
  }
  if (uint64_t n = json::Get<uint64_t>(locks, "deadlocks_omitted", 0)) {
    std::printf("  ... and %llu more deadlocks\n", static_cast<unsigned long long>(n));
  }
}

// An oom record's section `oom` with "growth_stacks" (where the memory
// went, from section `mem_growth`) added.
StatusOr<nlohmann::json> OomInfo(const store::RecordReader& reader, uint32_t pid) {
  ASSIGN_OR_RETURN(nlohmann::json oom, LoadOomSection(reader));
  if (oom.is_null())
    return Corrupt(fmt::format("record {}: no section 'oom'", reader.display_name()));
  ASSIGN_OR_RETURN(oom["growth_stacks"], analysis::MemGrowthSummary(reader, pid));
  return oom;
}

std::string Kib(uint64_t kb) { return FormatBytes(kb * 1024); }

// The figures of section `oom` (checked by LoadOomSection; its strings are
// names others chose: escaped).
void PrintOom(const nlohmann::json& o) {
  using json::Array;
  using json::Get;
  using json::Object;
  using json::Str;
  auto E = [](const std::string& s) { return EscapeForTerminal(s); };
  std::printf(
      "\nOOM kill: constraint %s; the victim had total-vm %s, anon-rss %s, file-rss %s, "
      "shmem-rss %s, oom_score_adj %d\n",
      E(Str(o, "constraint")).c_str(), Kib(Get<uint64_t>(o, "total_vm_kb", 0)).c_str(),
      Kib(Get<uint64_t>(o, "anon_rss_kb", 0)).c_str(),
      Kib(Get<uint64_t>(o, "file_rss_kb", 0)).c_str(),
      Kib(Get<uint64_t>(o, "shmem_rss_kb", 0)).c_str(), Get<int>(o, "oom_score_adj", 0));
  const auto& t = Object(o, "trigger");
  if (Get<bool>(t, "is_victim", true)) {
    std::printf("  triggered by: the victim's own allocation (tid %lld)\n",
                static_cast<long long>(Get<int64_t>(t, "tid", 0)));
  } else {
    std::printf("  triggered by: pid %lld (%s) uid %lld\n",
                static_cast<long long>(Get<int64_t>(t, "pid", 0)),
                E(json::RawText(t, "comm")).c_str(),
                static_cast<long long>(Get<int64_t>(t, "uid", -1)));
  }
  const auto& m = Object(o, "memcg");
  auto bytes = [&m](const char* k) {
    return m.contains(k) ? FormatBytes(Get<uint64_t>(m, k, 0)) : std::string("-");
  };
  std::printf("  memory cgroup %s (%s): limit %s, usage %s, peak %s",
              E(json::RawText(m, "path")).c_str(), E(Str(m, "version", "?")).c_str(),
              m.contains("limit_bytes") ? bytes("limit_bytes").c_str() : "none",
              bytes("usage_bytes").c_str(), bytes("peak_bytes").c_str());
  for (const auto& [k, v] : Object(m, "events").items()) {
    std::printf(", %s %llu", E(k).c_str(),
                static_cast<unsigned long long>(json::As<uint64_t>(v, 0)));
  }
  if (m.contains("error")) std::printf(" (%s)", E(Str(m, "error")).c_str());
  std::printf("\n");
  for (const auto& n : Array(o, "notes")) std::printf("  note: %s\n", E(Str(n)).c_str());
  const auto& g = Object(o, "growth_stacks");
  const auto& sampled = Object(o, "growth");
  if (!Get<bool>(sampled, "sampled", false)) {
    std::printf("  where the memory went: not sampled (%s)\n",
                E(Str(sampled, "unavailable")).c_str());
  } else {
    std::printf(
        "  where the memory went (%llu samples of %llu page faults each; share of the "
        "sampled growth):\n",
        static_cast<unsigned long long>(Get<uint64_t>(g, "samples", 0)),
        static_cast<unsigned long long>(Get<uint64_t>(sampled, "faults_per_sample", 0)));
    for (const auto& s : Array(g, "top")) {
      std::printf("  %6.2f%%  %s  (%s)\n", Get<double>(s, "share_pct", 0),
                  E(Str(s, "function")).c_str(), E(Str(s, "stack")).c_str());
    }
  }
  const auto& rss = Array(o, "rss");
  const uint64_t kill = Get<uint64_t>(o, "time_mono_ns", 0);
  std::printf("  RSS over the window:");
  for (size_t i = rss.size() > 32 ? rss.size() - 32 : 0; i < rss.size(); ++i) {
    const double ago = (static_cast<double>(kill) - Get<double>(rss[i], "time_mono_ns", 0)) / 1e9;
    const std::string when = ago > 0 ? fmt::format("{:.2f} s before", ago) : "at the kill";
    std::printf(" %s (%s)", FormatBytes(Get<uint64_t>(rss[i], "rss_bytes", 0)).c_str(),
                when.c_str());
  }
  std::printf("\n");
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
  // The crash's own sections (each optional; see record/crash_record.h).
  const nlohmann::json crash = Object(meta, "crash");
  ASSIGN_OR_RETURN(CrashSections sections, ReadCrashSections(reader));
  nlohmann::json& md = sections.metadata;
  nlohmann::json& bt = sections.backtrace;
  const std::string& maps = sections.maps;
  nlohmann::json history = nullptr;
  if (hreader != nullptr) {
    auto h = analysis::CrashHistory(*hreader, crash, hid, bins);
    if (h.ok()) {
      history = std::move(*h);
    } else {
      history_error = h.status().message();
    }
  }
  // An OOM kill's figures and where its memory went (the record is its own
  // history).
  const bool is_oom = ParseRecordKind(reader.header().kind) == RecordKind::kOom;
  nlohmann::json oom = nullptr;
  std::string oom_error;
  if (is_oom) {
    auto o = OomInfo(reader, json::Get<uint32_t>(crash, "pid", 0));
    if (o.ok()) {
      oom = std::move(*o);
    } else {
      oom_error = o.status().message();
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
    nlohmann::json out = {{"id", id},
                          {"kind", is_oom                     ? RecordKind::kOom
                                   : crash.contains("sender") ? RecordKind::kDeath
                                                              : RecordKind::kCrash},
                          {"crash", crash},
                          {"metadata", md},
                          {"backtrace", bt},
                          {"history", history},
                          {"maps", maps}};
    if (!history_error.empty()) out["history_error"] = history_error;
    if (is_oom) out["oom"] = oom;
    if (!oom_error.empty()) out["oom_error"] = oom_error;
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
  std::printf("   Executable: %s\n", E(ExecutableForDisplay(crash)).c_str());
  std::printf(" Command Line: %s\n", E(json::RawText(md, "cmdline")).c_str());
  std::printf("          CWD: %s\n", E(json::RawText(md, "cwd")).c_str());
  std::printf("     Build-ID: %s\n", E(Str(md, "build_id")).c_str());
  std::printf("         Core: %s%s\n",
              Get<bool>(crash, "core_stored", false)
                  ? FormatBytes(Get<uint64_t>(crash, "core_size", 0)).c_str()
                  : "not stored",
              Get<bool>(crash, "truncated", false) ? " (truncated at the size limit)" : "");
  // A death's: who sent the signal (its comm is the sender's own choice).
  if (const nlohmann::json& sender = Field(crash, "sender"); sender.is_object()) {
    if (!Get<bool>(sender, "known", false)) {
      std::printf("       Sender: unknown\n");
    } else {
      const bool kernel = Str(sender, "kind") == "kernel";
      std::printf(
          "       Sender: %s pid %lld (%s)%s, si_code %lld\n", kernel ? "the kernel, in" : "",
          static_cast<long long>(Get<int64_t>(sender, "pid", 0)),
          E(json::RawText(sender, "comm")).c_str(),
          sender.contains("uid") ? fmt::format(" uid {}", Get<int64_t>(sender, "uid", 0)).c_str()
                                 : "",
          static_cast<long long>(Get<int64_t>(sender, "si_code", 0)));
    }
  }
  for (const auto& n : Array(crash, "notes")) {
    std::printf("         Note: %s\n", E(n.is_string() ? Str(n) : json::Dump(n)).c_str());
  }
  if (is_oom && oom.is_object()) PrintOom(oom);
  if (!oom_error.empty()) std::printf("\nOOM kill: %s\n", E(oom_error).c_str());
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
    std::printf("\nBacktrace: none (%s)\n", crash.contains("sender")
                                                ? "no core was dumped: nothing to unwind"
                                                : E(Str(bt, "error", "see notes")).c_str());
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
    // Every thread of the process: a hang's threads have no samples but
    // were blocked (records of recorderd --off-cpu say where, how long).
    std::printf("\n  threads of the process in the history%s:\n",
                Get<bool>(h, "off_cpu", false) ? "" : " (no off-CPU time: recorderd --off-cpu)");
    for (const auto& t : Array(h, "threads")) {
      std::printf("    %7u %-16s %6llu samples on CPU", Get<uint32_t>(t, "tid", 0),
                  E(Str(t, "comm")).c_str(),
                  static_cast<unsigned long long>(Get<uint64_t>(t, "samples", 0)));
      if (Get<uint64_t>(t, "off_cpu_intervals", 0) > 0) {
        std::printf(", %s off CPU; longest %s %s in %s%s",
                    FormatDurationNs(Get<int64_t>(t, "off_cpu_ns", 0)).c_str(),
                    FormatDurationNs(Get<int64_t>(t, "longest_off_cpu_ns", 0)).c_str(),
                    E(Str(t, "longest_state")).c_str(), E(Str(t, "blocked_in")).c_str(),
                    Get<bool>(t, "blocked_at_end", false) ? " (still blocked at the end)" : "");
      }
      std::printf("\n");
    }
    PrintLocks(h);
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

Status RunCrashInfo(const CliContext& ctx, const CrashInfoArgs& args) {
  if (args.bins < 1 || args.bins > 1000) return InvalidArgument("--bins must be 1 to 1000");
  ASSIGN_OR_RETURN(auto found, OpenCrash(ctx, args.id));
  auto& [row, reader] = found;
  if (row.kind == RecordKind::kPanic) return PrintPanicInfo(row.id, *reader, args.json, args.bins);
  RETURN_IF_ERROR(CheckAccess(row.meta));
  // A death record holds its history itself.
  const std::string hid = row.kind == RecordKind::kDeath || row.kind == RecordKind::kOom
                              ? row.id
                              : json::Str(json::Object(row.meta, "crash"), "history");
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

}  // namespace flightrec::recorder::cli
