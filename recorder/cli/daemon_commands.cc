// recorder dump / status / trigger: requests to recorderd over its control
// socket; recorder report: replays a stored record through the attribution
// pipeline.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/units.h"
#include "recorder/attribution/attribution.h"
#include "recorder/cli/cli.h"
#include "recorder/daemon/dump_record.h"
#include "recorder/ipc/ipc.h"

namespace flightrec::recorder::cli {
namespace {

constexpr std::chrono::milliseconds kTimeout{30000};

StatusOr<nlohmann::json> Call(const CliContext& ctx, const std::string& method,
                              const nlohmann::json& params) {
  ASSIGN_OR_RETURN(auto client, ipc::Client::Connect(ctx.socket_path, kTimeout));
  return client->Call(method, params, kTimeout);
}

struct DumpArgs {
  std::string last = "5s";
  std::vector<uint32_t> pids;
  std::string reason = "manual";
  bool json = false;
};

Status RunDump(const CliContext& ctx, const DumpArgs& a) {
  ASSIGN_OR_RETURN(int64_t last, ParseDurationNs(a.last));
  if (last <= 0) return InvalidArgument("--last must be positive");
  nlohmann::json params = {{"last_ns", last}, {"reason", a.reason}};
  if (!a.pids.empty()) params["pids"] = a.pids;
  ASSIGN_OR_RETURN(auto r, Call(ctx, "dump", params));
  if (a.json)
    std::printf("%s\n", r.dump(2).c_str());
  else
    std::printf("%s\n", r.value("summary", r.dump()).c_str());
  return OkStatus();
}

Status RunStatus(const CliContext& ctx, bool json) {
  ASSIGN_OR_RETURN(auto s, Call(ctx, "status", nlohmann::json::object()));
  if (json) {
    std::printf("%s\n", s.dump(2).c_str());
    return OkStatus();
  }
  const auto& b = s["backend"];
  std::printf("recorderd pid %lld, up %.0f s\n", static_cast<long long>(s.value("pid", 0)),
              s.value("uptime_s", 0.0));
  std::printf("  backend:   %s, event %s, %lld Hz on %lld CPUs, call graph %s\n",
              b.value("backend", "?").c_str(), b.value("event", "?").c_str(),
              static_cast<long long>(b.value("frequency_hz", 0)),
              static_cast<long long>(b.value("cpus", 0)), b.value("callchain", "?").c_str());
  if (b.contains("fallback"))
    std::printf("             (%s)\n", b["fallback"].get<std::string>().c_str());
  std::printf("  rings:     %s data per CPU, %s sideband per CPU\n",
              FormatBytes(b.value("data_ring_bytes_per_cpu", uint64_t{0})).c_str(),
              FormatBytes(b.value("sideband_ring_bytes_per_cpu", uint64_t{0})).c_str());
  std::printf("  history:   %.1f s held now (%.0f s requested)\n", s.value("history_held_s", 0.0),
              s.value("history_requested_s", 0.0));
  std::printf("  sideband:  %llu events, %llu lost, %llu processes tracked\n",
              static_cast<unsigned long long>(s.value("sideband_events", uint64_t{0})),
              static_cast<unsigned long long>(s["rings"].value("sideband_lost", uint64_t{0})),
              static_cast<unsigned long long>(s.value("processes_tracked", uint64_t{0})));
  std::printf("  dumps:     %llu written, %llu failed, %llu rate-limited\n",
              static_cast<unsigned long long>(s.value("dumps", uint64_t{0})),
              static_cast<unsigned long long>(s.value("dump_failures", uint64_t{0})),
              static_cast<unsigned long long>(s.value("dumps_rate_limited", uint64_t{0})));
  for (const auto& t : s["triggers"]) {
    std::printf("  trigger %llu: uprobe %s, fired %llu, dumps %llu, suppressed %llu\n",
                static_cast<unsigned long long>(t.value("id", uint64_t{0})),
                t.value("uprobe", "").c_str(),
                static_cast<unsigned long long>(t.value("fired", uint64_t{0})),
                static_cast<unsigned long long>(t.value("dumps", uint64_t{0})),
                static_cast<unsigned long long>(t.value("suppressed", uint64_t{0})));
  }
  std::printf("  store:     %s, %s\n", s["store"].value("dir", "").c_str(),
              FormatBytes(s["store"].value("bytes", uint64_t{0})).c_str());
  return OkStatus();
}

struct TriggerArgs {
  std::string uprobe;
  std::string last = "5s";
  uint32_t max_per_hour = 6;
  uint64_t id = 0;
  bool json = false;
};

Status RunTriggerAdd(const CliContext& ctx, const TriggerArgs& a) {
  ASSIGN_OR_RETURN(int64_t last, ParseDurationNs(a.last));
  ASSIGN_OR_RETURN(
      auto r, Call(ctx, "trigger_add",
                   {{"uprobe", a.uprobe}, {"last_ns", last}, {"max_per_hour", a.max_per_hour}}));
  if (a.json)
    std::printf("%s\n", r.dump(2).c_str());
  else
    std::printf("trigger %llu armed: %s (at most %u dumps per hour)\n",
                static_cast<unsigned long long>(r.value("id", uint64_t{0})), a.uprobe.c_str(),
                a.max_per_hour);
  return OkStatus();
}

// --------------------------------------------------------------- report

struct ReportArgs {
  std::string id;
  std::string sort = "symbol";
  int64_t pid = -1;
  int64_t tid = -1;
  bool json = false;
  bool children = false;
  size_t limit = 30;
};

Status RunReport(const CliContext& ctx, const ReportArgs& a) {
  if (a.sort != "symbol" && a.sort != "dso" && a.sort != "pid" && a.sort != "tid" &&
      a.sort != "comm") {
    return InvalidArgument("--sort must be one of symbol, dso, pid, tid, comm");
  }
  ASSIGN_OR_RETURN(auto s, ctx.OpenStore());
  ASSIGN_OR_RETURN(auto reader, s->OpenRecord(a.id));
  ASSIGN_OR_RETURN(LoadedDump dump, LoadDump(*reader));
  ASSIGN_OR_RETURN(auto ksyms, attribution::KernelSymbols::FromText(dump.kallsyms));
  attribution::Attributor attributor;
  attribution::Symbolizer symbolizer(&attributor.cookies(), &ksyms);
  std::map<std::string, std::pair<uint64_t, uint64_t>> rows;  // key → (self, children)
  std::map<std::string, std::string> dso_of;
  std::set<std::string> changed_files;
  uint64_t total = 0;
  for (const Event& e : dump.events) {
    auto as = attributor.Add(e);
    if (!as) continue;
    if (a.pid >= 0 && as->pid != static_cast<uint32_t>(a.pid)) continue;
    if (a.tid >= 0 && as->tid != static_cast<uint32_t>(a.tid)) continue;
    ++total;
    std::vector<std::string> keys;
    for (const auto& f : as->frames) {
      attribution::Symbol sym = symbolizer.Resolve(f);
      if (sym.status == "file_changed") changed_files.insert(sym.dso);
      std::string key;
      if (a.sort == "symbol")
        key = sym.Display();
      else if (a.sort == "dso")
        key = sym.dso;
      else if (a.sort == "pid")
        key = std::to_string(as->pid);
      else if (a.sort == "tid")
        key = std::to_string(as->tid);
      else
        key = as->comm;
      if (a.sort == "symbol") dso_of[key] = sym.dso;
      keys.push_back(key);
    }
    if (keys.empty()) keys.push_back("[no frames]");
    rows[keys.front()].first++;
    std::set<std::string> seen;
    for (const auto& k : keys) {
      if (seen.insert(k).second) rows[k].second++;
    }
  }
  std::vector<std::pair<std::string, std::pair<uint64_t, uint64_t>>> sorted(rows.begin(),
                                                                            rows.end());
  std::sort(sorted.begin(), sorted.end(), [&](const auto& x, const auto& y) {
    uint64_t kx = a.children ? x.second.second : x.second.first;
    uint64_t ky = a.children ? y.second.second : y.second.first;
    return kx != ky ? kx > ky : x.first < y.first;
  });
  auto pct = [&](uint64_t n) { return total ? 100.0 * n / total : 0.0; };
  if (a.json) {
    nlohmann::json out = {{"id", reader->header().id},
                          {"samples", total},
                          {"sort", a.sort},
                          {"files_changed", changed_files},
                          {"rows", nlohmann::json::array()}};
    for (const auto& [k, v] : sorted) {
      if (!a.children && v.first == 0) continue;
      nlohmann::json r = {{"key", k},
                          {"self", v.first},
                          {"children", v.second},
                          {"self_pct", pct(v.first)},
                          {"children_pct", pct(v.second)}};
      if (a.sort == "symbol") r["dso"] = dso_of[k];
      out["rows"].push_back(r);
    }
    out["loss"] = dump.loss;
    std::printf("%s\n", out.dump(2).c_str());
    return OkStatus();
  }
  std::printf("# record %s: %llu samples", reader->header().id.c_str(),
              static_cast<unsigned long long>(total));
  if (dump.loss.is_object()) {
    std::printf(", lost: %llu paused, %llu overwritten, %llu outside window",
                static_cast<unsigned long long>(dump.loss.value("paused", uint64_t{0})),
                static_cast<unsigned long long>(dump.loss.value("overwritten", uint64_t{0})),
                static_cast<unsigned long long>(dump.loss.value("outside_window", uint64_t{0})));
  }
  std::printf("\n");
  for (const auto& f : changed_files) {
    std::printf(
        "# warning: %s changed since the record was made (build-id differs); its samples "
        "are shown as offsets, not attributed to the new file's symbols\n",
        f.c_str());
  }
  std::vector<std::vector<std::string>> table;
  size_t n = 0;
  for (const auto& [k, v] : sorted) {
    if (!a.children && v.first == 0) continue;
    if (n++ == a.limit) break;
    std::vector<std::string> row = {fmt::format("{:6.2f}%", pct(v.first)),
                                    fmt::format("{:6.2f}%", pct(v.second)), std::to_string(v.first),
                                    k};
    if (a.sort == "symbol") row.push_back(dso_of[k]);
    table.push_back(row);
  }
  std::vector<std::string> header = {"SELF", "CHILDREN", "SAMPLES",
                                     a.sort == "symbol" ? "SYMBOL" : a.sort};
  if (a.sort == "symbol") header.push_back("DSO");
  std::fputs(FormatTable(header, table).c_str(), stdout);
  return OkStatus();
}

}  // namespace

void AddDaemonCommands(CLI::App& app, CliContext& ctx) {
  auto da = std::make_shared<DumpArgs>();
  auto* dump = app.add_subcommand(
      "dump", "Ask recorderd to freeze its rings and store the last seconds as a record");
  dump->add_option("--last", da->last, "How much history to keep (e.g. 5s, 500ms)")
      ->capture_default_str();
  dump->add_option("--pid", da->pids, "Only these processes' samples (repeatable)");
  dump->add_option("--reason", da->reason, "Why, stored with the record")->capture_default_str();
  dump->add_flag("--json", da->json, "Machine-readable output");
  dump->callback([&ctx, da] { ctx.action = [&ctx, da] { return RunDump(ctx, *da); }; });

  auto sj = std::make_shared<bool>(false);
  auto* status =
      app.add_subcommand("status", "Show what recorderd is recording and what it has lost");
  status->add_flag("--json", *sj, "Machine-readable output");
  status->callback([&ctx, sj] { ctx.action = [&ctx, sj] { return RunStatus(ctx, *sj); }; });

  auto* trigger = app.add_subcommand("trigger", "Dump automatically when something happens");
  trigger->require_subcommand(1);
  auto ta = std::make_shared<TriggerArgs>();
  auto* add = trigger->add_subcommand(
      "add",
      "Dump the preceding history whenever a function runs (a uprobe, system-wide, re-armed)");
  add->add_option("--uprobe", ta->uprobe, "/path/to/binary:function")->required();
  add->add_option("--last", ta->last, "History to dump")->capture_default_str();
  add->add_option("--max-per-hour", ta->max_per_hour, "Rate limit")->capture_default_str();
  add->add_flag("--json", ta->json, "Machine-readable output");
  add->callback([&ctx, ta] { ctx.action = [&ctx, ta] { return RunTriggerAdd(ctx, *ta); }; });
  auto* tl = trigger->add_subcommand("list", "List triggers");
  tl->callback([&ctx] {
    ctx.action = [&ctx]() -> Status {
      ASSIGN_OR_RETURN(auto r, Call(ctx, "trigger_list", nlohmann::json::object()));
      std::printf("%s\n", r.dump(2).c_str());
      return OkStatus();
    };
  });
  auto* tr = trigger->add_subcommand("remove", "Remove a trigger");
  tr->add_option("ID", ta->id, "Trigger id")->required();
  tr->callback([&ctx, ta] {
    ctx.action = [&ctx, ta]() -> Status {
      ASSIGN_OR_RETURN(auto r, Call(ctx, "trigger_remove", {{"id", ta->id}}));
      std::printf("removed trigger %llu\n", static_cast<unsigned long long>(ta->id));
      return OkStatus();
    };
  });

  auto ra = std::make_shared<ReportArgs>();
  auto* report = app.add_subcommand("report", "Top functions of a record, like `perf report`");
  report->add_option("ID", ra->id, "Record id, unique prefix, or -1 for the newest")->required();
  report->add_option("--sort", ra->sort, "symbol, dso, pid, tid or comm")->capture_default_str();
  report->add_option("--pid", ra->pid, "Only this process");
  report->add_option("--tid", ra->tid, "Only this thread");
  report->add_option("--limit", ra->limit, "Rows to print")->capture_default_str();
  report->add_flag("--children", ra->children, "Sort by inclusive (children) share");
  report->add_flag("--json", ra->json, "Machine-readable output");
  report->callback([&ctx, ra] { ctx.action = [&ctx, ra] { return RunReport(ctx, *ra); }; });
}

}  // namespace flightrec::recorder::cli
