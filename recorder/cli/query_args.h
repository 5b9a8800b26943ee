// Options shared by every command that replays a record (report, timeline,
// export, flamegraph): the record, and which samples to include.
#pragma once

#include <unistd.h>

#include <CLI/CLI.hpp>

#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/checked_json.h"
#include "common/status.h"
#include "common/units.h"
#include "recorder/analysis/replay.h"
#include "recorder/attribution/process_labels.h"
#include "recorder/cli/label_filter.h"

namespace flightrec::recorder::cli {

// Options every query command shares.
struct QueryArgs {
  virtual ~QueryArgs() = default;
  std::string id;
  int64_t pid = -1;
  int64_t tid = -1;
  std::string since;  // offset from the window start, e.g. 1.5s
  std::string until;
  LabelFilter labels;
  bool json = false;
  bool progress = true;  // off for the fuzz harness (not an option)

  void Register(CLI::App* cmd) {
    cmd->add_option(
           "ID", id,
           "Record id, any unique part of it (e.g. its random suffix), or -1 for the newest")
        ->required();
    cmd->add_option("--pid", pid, "Only this process");
    cmd->add_option("--tid", tid, "Only this thread");
    cmd->add_option("--since", since,
                    "Only samples at least this far into the window (e.g. 1.5s, 200ms)");
    cmd->add_option("--until", until, "Only samples at most this far into the window");
    labels.Register(cmd);
    cmd->add_flag("--json", json, "Machine-readable output");
  }

  StatusOr<analysis::ReplayOptions> Options() const {
    analysis::ReplayOptions o;
    o.progress = progress;
    if (pid >= 0) o.pid = static_cast<uint32_t>(pid);
    if (tid >= 0) o.tid = static_cast<uint32_t>(tid);
    if (!since.empty()) {
      auto v = ParseDurationNs(since);
      if (!v.ok()) return InvalidArgument("--since: " + v.status().message());
      o.since_ns = *v;
    }
    if (!until.empty()) {
      auto v = ParseDurationNs(until);
      if (!v.ok()) return InvalidArgument("--until: " + v.status().message());
      o.until_ns = *v;
    }
    if (o.since_ns && o.until_ns && *o.since_ns > *o.until_ns) {
      return InvalidArgument("--since is after --until");
    }
    return o;
  }

  // analysis::Replay for a query command: a filter that leaves out every
  // sample of a record that has some is an error (kNotFound) naming what the
  // record holds, so that a mistyped pid or a window past the record's end is
  // never taken for "the program did nothing". A record without samples is a
  // result, filtered or not. `opts` is Options() and what the command adds.
  StatusOr<analysis::ReplayStats> Replay(const store::RecordReader& reader,
                                         const analysis::ReplayOptions& opts,
                                         const analysis::InfoFn& on_info,
                                         const analysis::SampleFn& on_sample) const;
  // The filters as typed: "--pid 5 --since 1s".
  std::string FilterText() const;
  // The pids of `meta`'s processes that --cgroup, --unit and --container
  // select; nullopt when none of them is given.
  std::optional<std::unordered_set<uint32_t>> LabelledPids(const nlohmann::json& meta) const;
};

// How `report --sort container` and exports name a container: as Kubernetes
// names it in a pod's status (containerID), "docker://<id>"; "" when none.
std::string ContainerName(const attribution::ProcessLabels& l);

// Output about programs whose executables are all gone names little but
// offsets: it is printed (offsets still locate code for someone who has the
// binaries), and the command fails so that scripts do not take it for a
// result.
inline Status AllExecutablesGone(const nlohmann::json& meta,
                                 const std::unordered_set<uint32_t>& pids) {
  std::set<std::string> exes, missing;
  for (const auto& p : json::Array(meta, "processes")) {
    std::string exe = json::Str(p, "exe");
    if (exe.empty() || pids.count(json::Get<uint32_t>(p, "pid", 0)) == 0) continue;
    exes.insert(exe);
    if (access(exe.c_str(), F_OK) != 0) missing.insert(exe);
  }
  if (exes.empty() || missing.size() != exes.size()) return OkStatus();
  std::string list;
  for (const auto& f : exes) list += (list.empty() ? "" : ", ") + f;
  return Status(StatusCode::kNotFound,
                fmt::format("none of the recorded programs' executables exist any more ({}); "
                            "their samples are shown as file offsets",
                            list));
}

}  // namespace flightrec::recorder::cli
