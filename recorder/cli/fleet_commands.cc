// recorder --fleet CONFIG crash list|info: the fleet's crashes, from its
// PostgreSQL index (recorder/fleet/fleet_index.h), grouped by crash
// signature. A command line of its own: with --fleet, the commands read the
// fleet, never the local store, so they cannot be confused with the local
// `crash list` and its options.
#include "recorder/cli/fleet_commands.h"

#include <CLI/CLI.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/cgroup.h"
#include "common/checked_json.h"
#include "common/terminal_escape.h"
#include "common/units.h"
#include "recorder/cli/cli.h"
#include "recorder/cli/label_filter.h"
#include "recorder/cli/usage.h"
#include "recorder/fleet/fleet_config.h"
#include "recorder/fleet/fleet_glue.h"
#include "recorder/fleet/fleet_index.h"
#include "recorder/fleet/record_cache.h"

namespace flightrec::recorder::cli {
namespace {

using fleet::FleetIndex;

struct FleetArgs {
  std::string config;
  bool json = false;
  // crash list
  bool group = false;
  std::string host;
  std::string since;
  int limit = 1000;
  LabelFilter labels;  // of the crashed process
  // crash info
  std::string id;
};

// "1h" (the last hour) or anything ParseTimeNs takes.
StatusOr<int64_t> SinceNs(const std::string& text) {
  if (text.empty()) return 0;
  const int64_t now = WallClockNs();
  if (auto d = ParseDurationNs(text); d.ok() && !text.empty() && text[0] != '-') return now - *d;
  return ParseTimeNs(text, now);
}

StatusOr<FleetIndex> OpenIndex(const std::string& config) {
  ASSIGN_OR_RETURN(fleet::FleetConfig cfg, fleet::LoadFleetConfig(config));
  if (cfg.pg_conninfo.empty()) {
    return InvalidArgument(config + ": [PostgreSQL] ConnInfo= is required for fleet queries");
  }
  ASSIGN_OR_RETURN(FleetIndex idx, FleetIndex::Connect(cfg.pg_conninfo, cfg.pg_password));
  RETURN_IF_ERROR(idx.CheckSchema());
  return idx;
}

Status CrashList(const FleetArgs& a) {
  ASSIGN_OR_RETURN(FleetIndex idx, OpenIndex(a.config));
  fleet::CrashQuery q;
  q.host = a.host;
  q.limit = a.limit;
  q.unit = a.labels.unit;
  q.container = a.labels.container;
  q.cgroup = a.labels.cgroup;
  ASSIGN_OR_RETURN(q.since_ns, SinceNs(a.since));
  if (a.group) {
    ASSIGN_OR_RETURN(auto groups, idx.GroupCrashes(q));
    if (a.json) {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& g : groups) {
        out.push_back({{"signature", g.signature_id},
                       {"title", g.title},
                       {"crashes", g.crashes},
                       {"hosts", g.hosts},
                       {"first_ns", g.first_ns},
                       {"last_ns", g.last_ns},
                       {"latest", g.latest_host + "/" + g.latest_record}});
      }
      std::printf("%s\n", json::Dump(out, 2).c_str());
      return OkStatus();
    }
    std::vector<std::vector<std::string>> rows;
    for (const auto& g : groups) {
      rows.push_back({g.signature_id, std::to_string(g.crashes), std::to_string(g.hosts),
                      FormatTimeNs(g.last_ns), g.latest_host + "/" + g.latest_record, g.title});
    }
    std::fputs(
        FormatTable({"SIGNATURE", "CRASHES", "HOSTS", "LAST", "LATEST", "TITLE"}, rows).c_str(),
        stdout);
    if (rows.empty()) std::printf("(no crashes)\n");
    return OkStatus();
  }
  ASSIGN_OR_RETURN(auto crashes, idx.ListCrashes(q));
  if (a.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& c : crashes) {
      out.push_back({{"host", c.host_id},
                     {"id", c.record_id},
                     {"time_ns", c.time_ns},
                     {"comm", c.comm},
                     {"signal_name", c.signal_name},
                     {"exe", c.executable},
                     {"signature", c.signature_id},
                     {"title", c.title},
                     {"unit", c.unit},
                     {"container_runtime", c.container_runtime},
                     {"container_id", c.container_id}});
    }
    std::printf("%s\n", json::Dump(out, 2).c_str());
    return OkStatus();
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& c : crashes) {
    // The container (as `crash list` shows it) or unit says more than a comm.
    std::string where = c.unit;
    if (!c.container_id.empty()) {
      where = (c.container_runtime.empty() ? "" : c.container_runtime + "://") +
              c.container_id.substr(0, 12);
    }
    rows.push_back({FormatTimeNs(c.time_ns), c.host_id, c.record_id, c.signal_name, c.comm,
                    where.empty() ? "-" : where, c.signature_id, c.title});
  }
  std::fputs(
      FormatTable({"TIME", "HOST", "ID", "SIGNAL", "COMM", "UNIT/CONTAINER", "SIGNATURE", "TITLE"},
                  rows)
          .c_str(),
      stdout);
  if (rows.empty()) std::printf("(no crashes)\n");
  return OkStatus();
}

Status CrashInfo(const FleetArgs& a) {
  ASSIGN_OR_RETURN(FleetIndex idx, OpenIndex(a.config));
  ASSIGN_OR_RETURN(fleet::CrashDetail d, idx.GetCrash(a.id));
  const auto& r = d.record;
  const auto& c = d.crash;
  if (a.json) {
    nlohmann::json procs = nlohmann::json::array();
    for (const auto& p : c.processes) {
      nlohmann::json jp = {
          {"pid", p.pid}, {"comm", p.comm}, {"exe", p.executable}, {"build_id", p.build_id}};
      cgroup::AddCgroupToJson(p.where, &jp);
      procs.push_back(std::move(jp));
    }
    nlohmann::json out = {
        {"host", r.host_id},
        {"id", r.record_id},
        {"time_ns", r.time_ns},
        {"object", {{"key", r.object_key}, {"sha256", r.sha256}, {"bytes", r.bytes}}},
        {"crash",
         {{"pid", c.pid},
          {"comm", c.comm},
          {"signal", c.signal},
          {"signal_name", c.signal_name},
          {"exe", c.executable},
          {"build_id", c.build_id}}},
        {"signature", c.signature.ToJson()},
        {"group", {{"crashes", d.group_crashes}, {"hosts", d.group_hosts}}},
        {"processes", procs}};
    cgroup::AddCgroupToJson(c.where, &out["crash"]);
    std::printf("%s\n", json::Dump(out, 2).c_str());
    return OkStatus();
  }
  // Every string here came from a crashed program's record: escaped.
  auto E = [](const std::string& s) { return EscapeForTerminal(s); };
  std::printf("           ID: %s/%s\n", E(r.host_id).c_str(), E(r.record_id).c_str());
  std::printf("    Timestamp: %s\n", FormatTimeNs(r.time_ns).c_str());
  std::printf("          PID: %u (%s)\n", c.pid, E(c.comm).c_str());
  std::printf("       Signal: %s (%d)\n", E(c.signal_name).c_str(), c.signal);
  std::printf("   Executable: %s\n", E(c.executable).c_str());
  if (!c.where.unit.empty()) std::printf("         Unit: %s\n", E(c.where.unit).c_str());
  if (!c.where.container_id.empty()) {
    std::printf(
        "    Container: %s%s\n",
        E(c.where.container_runtime.empty() ? "" : c.where.container_runtime + "://").c_str(),
        E(c.where.container_id).c_str());
  }
  if (!c.where.pod_uid.empty()) std::printf("          Pod: %s\n", E(c.where.pod_uid).c_str());
  if (!c.where.path.empty()) std::printf("       Cgroup: %s\n", E(c.where.path).c_str());
  std::printf("     Build-ID: %s\n", E(c.build_id.empty() ? "(unknown)" : c.build_id).c_str());
  std::printf("    Signature: %s, %lld crash%s on %lld host%s\n", E(c.signature.id).c_str(),
              static_cast<long long>(d.group_crashes), d.group_crashes == 1 ? "" : "es",
              static_cast<long long>(d.group_hosts), d.group_hosts == 1 ? "" : "s");
  std::printf("        Title: %s\n", E(c.signature.title).c_str());
  for (size_t i = 0; i < c.signature.frames.size(); ++i) {
    std::printf("           #%zu %s (%s)\n", i, E(c.signature.frames[i].function).c_str(),
                E(c.signature.frames[i].module).c_str());
  }
  std::printf("       Record: %s, %s, sha256 %s\n", E(r.object_key).c_str(),
              FormatBytes(r.bytes).c_str(), E(r.sha256).c_str());
  return OkStatus();
}

}  // namespace

bool IsRecordCommand(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (std::strcmp(a, "--fleet") == 0 || std::strcmp(a, "--store") == 0 ||
        std::strcmp(a, "--socket") == 0) {
      ++i;  // its value
      continue;
    }
    if (a[0] == '-') continue;
    for (const char* c : {"report", "timeline", "script", "export", "flamegraph"}) {
      if (std::strcmp(a, c) == 0) return true;
    }
    return false;
  }
  return false;
}

StatusOr<std::unique_ptr<store::RecordReader>> OpenFleetRecord(const std::string& config,
                                                               const std::string& id) {
  ASSIGN_OR_RETURN(fleet::FleetConfig cfg, fleet::LoadFleetConfig(config));
  if (cfg.pg_conninfo.empty()) {
    return InvalidArgument(config + ": [PostgreSQL] ConnInfo= is required for fleet queries");
  }
  std::string cache_dir = cfg.cache_dir.string();
  if (cache_dir.empty()) {
    // Like other caches: root's in /var/cache, a user's in XDG_CACHE_HOME.
    const char* xdg = std::getenv("XDG_CACHE_HOME");
    const char* home = std::getenv("HOME");
    if (geteuid() == 0) {
      cache_dir = "/var/cache/flightrec";
    } else if (xdg && *xdg) {
      cache_dir = std::string(xdg) + "/flightrec";
    } else if (home && *home) {
      cache_dir = std::string(home) + "/.cache/flightrec";
    }
  }
  ASSIGN_OR_RETURN(FleetIndex idx, FleetIndex::Connect(cfg.pg_conninfo, cfg.pg_password));
  RETURN_IF_ERROR(idx.CheckSchema());
  ASSIGN_OR_RETURN(fleet::RecordCache cache,
                   fleet::RecordCache::Open(cache_dir, cfg.cache_max_bytes));
  ASSIGN_OR_RETURN(auto fetcher, fleet::S3ObjectFetcher::Create(cfg, cache.dir()));
  ASSIGN_OR_RETURN(std::string path, fleet::FetchRecord(idx, cache, *fetcher, id));
  return store::RecordReader::Open(path);
}

bool WantsFleet(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) return false;
    if (std::strcmp(argv[i], "--fleet") == 0 || std::strncmp(argv[i], "--fleet=", 8) == 0) {
      return true;
    }
  }
  return false;
}

int FleetMain(int argc, char** argv) {
  CLI::App app{
      "recorder --fleet CONFIG: the fleet's crashes, from its PostgreSQL index.\n"
      "CONFIG is the file recorderd --fleet reads (docs/FLEET.md); its PostgreSQL password\n"
      "comes from its root-only CredentialsFile=."};
  app.require_subcommand(1);
  app.fallthrough();
  FleetArgs a;
  app.add_option("--fleet", a.config, "Fleet config file")->required();
  auto* crash = app.add_subcommand("crash", "The fleet's crashes, grouped by crash signature");
  crash->require_subcommand(1);
  auto* list = crash->add_subcommand("list", "Crashes in the fleet, newest first");
  list->add_flag("--group", a.group,
                 "One line per crash signature (the same bug on many hosts), largest first");
  list->add_option("--host", a.host, "Only this host's crashes");
  list->add_option("--since", a.since, "Only crashes in the last DURATION (1h, 7d) or since T");
  list->add_option("--limit", a.limit, "At most N lines")->capture_default_str();
  a.labels.Register(list);
  list->add_flag("--json", a.json, "JSON output");
  auto* info = crash->add_subcommand("info", "One crash as the index knows it, with its group");
  info->add_option("ID", a.id, "Record id, HOST/ID, or a unique prefix of an id")->required();
  info->add_flag("--json", a.json, "JSON output");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return ExitOnParseError(app, e);
  }
  Status st = list->parsed() ? CrashList(a) : CrashInfo(a);
  if (!st.ok()) {
    std::fprintf(stderr, "recorder: error: %s\n", EscapeForTerminal(st.message()).c_str());
    return st.code() == StatusCode::kInvalidArgument ? kExitUsage : 1;
  }
  return 0;
}

}  // namespace flightrec::recorder::cli
