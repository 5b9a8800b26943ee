// --cgroup, --unit and --container, shared by the query commands, `list` and
// `crash list`.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include <nlohmann/json.hpp>

#include "common/cgroup.h"

namespace flightrec::recorder::cli {

// --cgroup, --unit and --container: processes by where they ran (a record's
// meta.processes labels, or the crashed process's).
struct LabelFilter {
  std::string cgroup, unit, container;

  void Register(CLI::App* cmd) {
    cmd->add_option("--cgroup", cgroup,
                    "Only processes in this cgroup or below it (e.g. /system.slice)");
    cmd->add_option("--unit", unit, "Only processes of this systemd unit or scope (nginx.service)");
    cmd->add_option("--container", container,
                    "Only processes of the container whose id starts with this (docker ps's "
                    "short id does; runtime://id too)");
  }
  bool empty() const { return cgroup.empty() && unit.empty() && container.empty(); }
  bool Matches(const cgroup::CgroupInfo& c) const;
  // Whether any process of a record's meta.processes matches.
  bool MatchesAnyProcess(const nlohmann::json& meta) const;
  // The filters as typed: "--unit a.service".
  std::string Text() const;
};

}  // namespace flightrec::recorder::cli
