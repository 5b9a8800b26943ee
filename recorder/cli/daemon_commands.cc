// recorder dump / status / trigger: requests to recorderd over its control
// socket.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/checked_json.h"
#include "common/terminal_escape.h"
#include "common/units.h"
#include "recorder/attribution/attribution.h"
#include "recorder/cli/cli.h"
#include "recorder/ipc/ipc.h"
#include "recorder/record/dump_record.h"

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
  bool live_attribution = false;
};

Status RunDump(const CliContext& ctx, const DumpArgs& a) {
  ASSIGN_OR_RETURN(int64_t last, ParseDurationNs(a.last));
  if (last <= 0) return InvalidArgument("--last must be positive");
  nlohmann::json params = {{"last_ns", last}, {"reason", a.reason}};
  if (!a.pids.empty()) params["pids"] = a.pids;
  if (a.live_attribution) params["live_attribution"] = true;
  ASSIGN_OR_RETURN(auto r, Call(ctx, "dump", params));
  if (a.json)
    std::printf("%s\n", r.dump(2).c_str());
  else
    std::printf("%s\n", r.value("summary", r.dump()).c_str());
  return OkStatus();
}

// recorderd --fleet's shipper. Names and errors come from the config and
// the gateway: escaped like any other text.
void PrintFleetStatus(const nlohmann::json& f) {
  auto u = [&](const char* k) { return static_cast<unsigned long long>(f.value(k, uint64_t{0})); };
  auto text = [&](const char* k) {
    return EscapeForTerminal(f[k].is_string() ? f[k].get<std::string>() : std::string());
  };
  std::printf("  fleet:     host %s -> bucket %s at %s, index %s\n", text("host_id").c_str(),
              text("bucket").c_str(), text("endpoint").c_str(), text("index").c_str());
  std::printf("             %llu records pending (%s), %llu shipped (%s), %llu retries\n",
              u("pending_records"), FormatBytes(u("pending_bytes")).c_str(), u("shipped_records"),
              FormatBytes(u("shipped_bytes")).c_str(), u("retries"));
  if (!text("uploading").empty())
    std::printf("             uploading %s\n", text("uploading").c_str());
  if (u("unshipped_evicted_records") > 0) {
    std::printf("             %llu unshipped records (%s) removed by retention before shipping\n",
                u("unshipped_evicted_records"), FormatBytes(u("unshipped_evicted_bytes")).c_str());
  }
  const int64_t now_s = WallClockNs() / 1'000'000'000;
  const int64_t ok_s = f.value("last_success_time", int64_t{0});
  if (ok_s > 0) {
    std::printf("             last success %s (%lld s ago)\n",
                FormatTimeNs(ok_s * 1'000'000'000).c_str(), static_cast<long long>(now_s - ok_s));
  } else {
    std::printf("             last success: none yet\n");
  }
  if (!text("last_error").empty()) {
    std::printf("             last error (%llu in a row, next try in %.1f s): %s\n",
                u("consecutive_failures"), f.value("backoff_ms", int64_t{0}) / 1000.0,
                text("last_error").c_str());
  }
}

// "uprobe /bin/x:f" or "blocked 2.00 s in D, pid 42".
std::string TriggerWhat(const nlohmann::json& t) {
  if (t.contains("uprobe")) return "uprobe " + EscapeForTerminal(t.value("uprobe", ""));
  return EscapeForTerminal(t.value("what", ""));
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
  // The off-CPU key is absent from backends that have no off-CPU capture.
  if (const auto& oc = b.value("off_cpu", nlohmann::json::object()); oc.value("enabled", false)) {
    std::printf(
        "  off-CPU:   on (sched:sched_switch), threshold %s, rings per CPU: %s for "
        "switch-outs, %s for switch-ins\n",
        FormatDurationNs(oc.value("threshold_ns", int64_t{0})).c_str(),
        FormatBytes(oc.value("ring_bytes_per_cpu", uint64_t{0})).c_str(),
        FormatBytes(oc.value("switch_in_ring_bytes_per_cpu", uint64_t{0})).c_str());
    if (const auto& cap = oc.value("capacity", nlohmann::json()); cap.is_object()) {
      std::printf(
          "             at the %.0f blocking switches/s per CPU seen, %.0f bytes each: "
          "~%.1f s of history\n",
          cap.value("switch_outs_per_s_per_cpu", 0.0), cap.value("bytes_per_switch_out", 0.0),
          cap.value("ring_holds_s", 0.0));
    }
  } else {
    std::printf("  off-CPU:   off (recorderd --off-cpu)\n");
  }
  if (const auto& t = json::Object(s, "aux_trace"); json::Get<bool>(t, "enabled", false)) {
    std::printf("  hw trace:  on (%s), %s AUX area per CPU, %llu snapshots; cut at a crash: %s\n",
                EscapeForTerminal(json::Str(t, "pmu")).c_str(),
                FormatBytes(json::Get<uint64_t>(t, "area_bytes_per_cpu", 0)).c_str(),
                static_cast<unsigned long long>(json::Get<uint64_t>(t, "snapshots", 0)),
                EscapeForTerminal(json::Str(t, "crash_cut")).c_str());
  } else if (t.is_object() && !t.empty()) {
    std::printf("  hw trace:  %s\n", EscapeForTerminal(json::Str(t, "why_off")).c_str());
  }
  std::printf("  rings:     %s data per CPU, %s sideband per CPU\n",
              FormatBytes(b.value("data_ring_bytes_per_cpu", uint64_t{0})).c_str(),
              FormatBytes(b.value("sideband_ring_bytes_per_cpu", uint64_t{0})).c_str());
  if (const auto& r = s["rings"];
      r.is_object() && r.value("off_cpu", nlohmann::json()).is_object()) {
    std::printf("  off-CPU history: %.1f s of blocking switch-outs held now\n",
                r["off_cpu"].value("history_held_s", 0.0));
  }
  std::printf("  history:   %.1f s held now (%.0f s requested)\n", s.value("history_held_s", 0.0),
              s.value("history_requested_s", 0.0));
  if (s.contains("history_capacity") && s["history_capacity"].is_string()) {
    std::printf("             %s\n",
                EscapeForTerminal(s["history_capacity"].get<std::string>()).c_str());
  }
  std::printf("  sideband:  %llu events, %llu lost, %llu processes tracked\n",
              static_cast<unsigned long long>(s.value("sideband_events", uint64_t{0})),
              static_cast<unsigned long long>(s["rings"].value("sideband_lost", uint64_t{0})),
              static_cast<unsigned long long>(s.value("processes_tracked", uint64_t{0})));
  if (const auto& r = s["rings"]; r.is_object() && r.contains("crash_markers_available")) {
    // The module backend: crash markers need a hook in the kernel's crash
    // path. The reason is the module's text; escaped like any other.
    if (r.value("crash_markers_available", false)) {
      std::printf("  crash markers: %s, %llu taken, %llu dropped, %llu per uid, %llu coalesced\n",
                  EscapeForTerminal(r.value("crash_hook", "?")).c_str(),
                  static_cast<unsigned long long>(r.value("markers_taken", uint64_t{0})),
                  static_cast<unsigned long long>(r.value("markers_dropped", uint64_t{0})),
                  static_cast<unsigned long long>(r.value("markers_per_uid", uint64_t{0})),
                  static_cast<unsigned long long>(r.value("markers_coalesced", uint64_t{0})));
    } else {
      std::printf("  crash markers: unavailable: %s\n",
                  EscapeForTerminal(r.value("crash_markers_unavailable", "?")).c_str());
    }
    if (r.value("throttled", uint64_t{0}) || r.value("cpus_not_counting", uint64_t{0})) {
      std::printf("  counters:  %llu throttled periods, %llu CPUs not counting\n",
                  static_cast<unsigned long long>(r.value("throttled", uint64_t{0})),
                  static_cast<unsigned long long>(r.value("cpus_not_counting", uint64_t{0})));
    }
  }
  std::printf("  dumps:     %llu written, %llu failed, %llu rate-limited\n",
              static_cast<unsigned long long>(s.value("dumps", uint64_t{0})),
              static_cast<unsigned long long>(s.value("dump_failures", uint64_t{0})),
              static_cast<unsigned long long>(s.value("dumps_rate_limited", uint64_t{0})));
  if (const auto& d = s.value("deaths", nlohmann::json::object()); d.is_object()) {
    auto n = [&d](const char* k) {
      return static_cast<unsigned long long>(d.value(k, uint64_t{0}));
    };
    if (d.value("enabled", false)) {
      std::printf(
          "  deaths:    %llu seen, %llu recorded, %llu with a crash record, %llu rate-limited, "
          "%llu failed\n",
          n("seen"), n("recorded"), n("crash_record"), n("rate_limited"), n("failed"));
      std::printf("  oom kills: %llu recorded as oom%s; memory growth %s\n", n("oom_recorded"),
                  d.contains("oom_watch_unavailable")
                      ? (" (not told apart: " +
                         EscapeForTerminal(d.value("oom_watch_unavailable", "")) + ")")
                            .c_str()
                      : "",
                  d.contains("mem_growth") ? "sampled" : "not sampled");
    } else {
      std::printf("  deaths:    not watched%s\n",
                  d.contains("unavailable")
                      ? (": " + EscapeForTerminal(d.value("unavailable", ""))).c_str()
                      : " (--deaths off)");
    }
  }
  for (const auto& t : s["triggers"]) {
    std::printf("  trigger %llu: %s, fired %llu, dumps %llu, suppressed %llu\n",
                static_cast<unsigned long long>(t.value("id", uint64_t{0})), TriggerWhat(t).c_str(),
                static_cast<unsigned long long>(t.value("fired", uint64_t{0})),
                static_cast<unsigned long long>(t.value("dumps", uint64_t{0})),
                static_cast<unsigned long long>(t.value("suppressed", uint64_t{0})));
  }
  std::printf("  store:     %s, %s\n", s["store"].value("dir", "").c_str(),
              FormatBytes(s["store"].value("bytes", uint64_t{0})).c_str());
  if (s.contains("fleet") && s["fleet"].is_object()) PrintFleetStatus(s["fleet"]);
  return OkStatus();
}

struct TriggerArgs {
  std::string uprobe;
  std::string blocked;  // a duration
  bool hung_task = false;
  std::string state;
  int64_t pid = 0;
  std::string exe, cgroup;
  std::string last = "5s";
  uint32_t max_per_hour = 6;
  uint64_t id = 0;
  bool json = false;
};

// The request's kind and selector; the daemon checks them (a peer's input).
StatusOr<nlohmann::json> TriggerRequest(const TriggerArgs& a) {
  if (!a.uprobe.empty() + !a.blocked.empty() + a.hung_task != 1) {
    return InvalidArgument("give one of --uprobe, --blocked, --hung-task");
  }
  ASSIGN_OR_RETURN(int64_t last, ParseDurationNs(a.last));
  nlohmann::json req = {{"last_ns", last}, {"max_per_hour", a.max_per_hour}};
  if (!a.uprobe.empty()) {
    if (!a.state.empty() || a.pid != 0 || !a.exe.empty() || !a.cgroup.empty()) {
      return InvalidArgument("--state, --pid, --exe and --cgroup go with --blocked or --hung-task");
    }
    req["uprobe"] = a.uprobe;
    return req;
  }
  if (!a.blocked.empty()) {
    auto ns = ParseDurationNs(a.blocked);
    if (!ns.ok()) return ns.status().Annotate("--blocked");
    req["blocked_ns"] = *ns;
  } else {
    req["hung_task"] = true;
  }
  if (!a.state.empty()) req["state"] = a.state;
  if (a.pid != 0) req["pid"] = a.pid;
  if (!a.exe.empty()) req["exe"] = a.exe;
  if (!a.cgroup.empty()) req["cgroup"] = a.cgroup;
  return req;
}

Status RunTriggerAdd(const CliContext& ctx, const TriggerArgs& a) {
  ASSIGN_OR_RETURN(nlohmann::json req, TriggerRequest(a));
  ASSIGN_OR_RETURN(auto r, Call(ctx, "trigger_add", req));
  if (a.json)
    std::printf("%s\n", r.dump(2).c_str());
  else
    std::printf("trigger %llu armed: %s (at most %u dumps per hour)\n",
                static_cast<unsigned long long>(r.value("id", uint64_t{0})),
                EscapeForTerminal(r.value("what", a.uprobe)).c_str(), a.max_per_hour);
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
  dump->add_flag("--live-attribution", da->live_attribution,
                 "Also store each sample as recorderd attributes it now from its live process "
                 "table (see `recorder script --live`)");
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
      "Dump the preceding history whenever a function runs (--uprobe, system-wide, re-armed; "
      "recorderd opens the binary with your credentials), or once per hang when a thread has "
      "been blocked off CPU for a while (--blocked, needs recorderd --off-cpu) or the kernel "
      "reports a hung task (--hung-task)");
  add->add_option("--uprobe", ta->uprobe, "/path/to/binary:function");
  add->add_option("--blocked", ta->blocked,
                  "Dump when a selected thread has been off CPU this long (e.g. 5s) in --state; "
                  "once per hang of its process, however long it lasts");
  add->add_flag("--hung-task", ta->hung_task,
                "Dump when the kernel's hung-task detector reports a selected task (blocked in D, "
                "not killable, for kernel.hung_task_timeout_secs; needs CONFIG_DETECT_HUNG_TASK)");
  add->add_option("--state", ta->state,
                  "With --blocked: D (uninterruptible, the default), S (interruptible sleep: "
                  "a mutex or futex wait, poll; needs --pid, --exe or --cgroup) or DS");
  add->add_option("--pid", ta->pid, "Only threads of this process");
  add->add_option("--exe", ta->exe,
                  "Only threads of processes running this executable (absolute path)");
  add->add_option(
      "--cgroup", ta->cgroup,
      "Only threads of processes in this cgroup (its path, or below it) or systemd unit");
  add->add_option("--last", ta->last, "History to dump")->capture_default_str();
  add->add_option("--max-per-hour", ta->max_per_hour, "Rate limit")->capture_default_str();
  add->add_flag("--json", ta->json, "Machine-readable output");
  add->callback([&ctx, ta] { ctx.action = [&ctx, ta] { return RunTriggerAdd(ctx, *ta); }; });
  auto tlj = std::make_shared<bool>(false);
  auto* tl = trigger->add_subcommand("list", "List triggers");
  tl->add_flag("--json", *tlj, "Machine-readable output");
  tl->callback([&ctx, tlj] {
    ctx.action = [&ctx, tlj]() -> Status {
      ASSIGN_OR_RETURN(auto r, Call(ctx, "trigger_list", nlohmann::json::object()));
      if (*tlj || !r.is_array()) {
        std::printf("%s\n", r.dump(2).c_str());
        return OkStatus();
      }
      if (r.empty()) std::printf("no triggers\n");
      for (const auto& t : r) {
        std::printf("trigger %llu: %s, fired %llu, dumps %llu, suppressed %llu\n",
                    static_cast<unsigned long long>(t.value("id", uint64_t{0})),
                    TriggerWhat(t).c_str(),
                    static_cast<unsigned long long>(t.value("fired", uint64_t{0})),
                    static_cast<unsigned long long>(t.value("dumps", uint64_t{0})),
                    static_cast<unsigned long long>(t.value("suppressed", uint64_t{0})));
      }
      return OkStatus();
    };
  });
  auto trj = std::make_shared<bool>(false);
  auto* tr =
      trigger->add_subcommand("remove", "Remove a trigger (one you added; root removes any)");
  tr->add_option("ID", ta->id, "Trigger id")->required();
  tr->add_flag("--json", *trj, "Machine-readable output");
  tr->callback([&ctx, ta, trj] {
    ctx.action = [&ctx, ta, trj]() -> Status {
      ASSIGN_OR_RETURN(auto r, Call(ctx, "trigger_remove", {{"id", ta->id}}));
      if (*trj)
        std::printf("%s\n", nlohmann::json{{"removed", ta->id}, {"reply", r}}.dump(2).c_str());
      else
        std::printf("removed trigger %llu\n", static_cast<unsigned long long>(ta->id));
      return OkStatus();
    };
  });
}

}  // namespace flightrec::recorder::cli
