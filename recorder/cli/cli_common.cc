// What every command of the `recorder` CLI shares: opening the store and
// printing a table. Part of the query library.
#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "common/terminal_escape.h"
#include "common/units.h"
#include "recorder/cli/cli.h"
#include "recorder/cli/query_args.h"

namespace flightrec::recorder::cli {

StatusOr<std::unique_ptr<store::Store>> CliContext::OpenStore(bool create,
                                                              bool full_recovery) const {
  store::StoreOptions opts;
  opts.create = create;
  opts.full_recovery = full_recovery;
  auto s = store::Store::Open(store_dir, opts);
  if (!s.ok() && s.status().code() == StatusCode::kPermissionDenied) {
    opts.read_only = true;  // e.g. reading a store we may read but not write
    return store::Store::Open(store_dir, opts);
  }
  return s;
}

StatusOr<std::unique_ptr<store::RecordReader>> CliContext::OpenRecord(const std::string& id) const {
  if (open_record) return open_record(id);
  ASSIGN_OR_RETURN(auto store, OpenStore());
  // The reader holds its own fd: it outlives the store.
  return store->OpenRecord(id);
}

std::string QueryArgs::FilterText() const {
  std::string text;
  auto add = [&](const char* flag, const std::string& value) {
    text += fmt::format("{}{} {}", text.empty() ? "" : " ", flag, value);
  };
  if (pid >= 0) add("--pid", std::to_string(pid));
  if (tid >= 0) add("--tid", std::to_string(tid));
  if (!since.empty()) add("--since", since);
  if (!until.empty()) add("--until", until);
  if (!labels.empty()) text += (text.empty() ? "" : " ") + labels.Text();
  return text;
}

std::string LabelFilter::Text() const {
  std::string text;
  for (const auto& [flag, value] : {std::pair<const char*, const std::string&>{"--cgroup", cgroup},
                                    {"--unit", unit},
                                    {"--container", container}}) {
    if (!value.empty()) text += fmt::format("{}{} {}", text.empty() ? "" : " ", flag, value);
  }
  return text;
}

std::string ContainerName(const attribution::ProcessLabels& l) {
  const auto& c = l.cgroup;
  if (c.container_id.empty()) return "";
  return c.container_runtime.empty() ? c.container_id
                                     : c.container_runtime + "://" + c.container_id;
}

namespace {

// "/a/b" is in --cgroup /a and /a/b, not in /a/bc.
bool InCgroup(const std::string& path, std::string want) {
  while (want.size() > 1 && want.back() == '/') want.pop_back();
  if (want == "/") return !path.empty();
  return path.starts_with(want) && (path.size() == want.size() || path[want.size()] == '/');
}

}  // namespace

bool LabelFilter::Matches(const cgroup::CgroupInfo& c) const {
  // "docker://<id>" as report shows it, or the id (any prefix of it).
  std::string_view id = container;
  if (size_t sep = id.find("://"); sep != std::string_view::npos) id = id.substr(sep + 3);
  if (!cgroup.empty() && !InCgroup(c.path, cgroup)) return false;
  if (!unit.empty() && c.unit != unit) return false;
  return container.empty() || (!c.container_id.empty() && c.container_id.starts_with(id));
}

bool LabelFilter::MatchesAnyProcess(const nlohmann::json& meta) const {
  for (const auto& [pid, l] : attribution::LabelsByPid(meta)) {
    if (Matches(l.cgroup)) return true;
  }
  return false;
}

std::optional<std::unordered_set<uint32_t>> QueryArgs::LabelledPids(
    const nlohmann::json& meta) const {
  if (labels.empty()) return std::nullopt;
  std::unordered_set<uint32_t> pids;
  for (const auto& [pid, l] : attribution::LabelsByPid(meta)) {
    if (labels.Matches(l.cgroup)) pids.insert(pid);
  }
  return pids;
}

StatusOr<analysis::ReplayStats> QueryArgs::Replay(const store::RecordReader& reader,
                                                  const analysis::ReplayOptions& opts,
                                                  const analysis::InfoFn& on_info,
                                                  const analysis::SampleFn& on_sample) const {
  analysis::RecordInfo info;
  analysis::ReplayOptions with_labels = opts;
  if (auto pids = LabelledPids(reader.meta())) with_labels.pids = std::move(pids);
  ASSIGN_OR_RETURN(auto stats, analysis::Replay(
                                   reader, with_labels,
                                   [&](const analysis::RecordInfo& i) {
                                     info = i;
                                     on_info(i);
                                   },
                                   on_sample));
  if (stats.samples > 0 || stats.filtered == 0) return stats;
  // Enough pids to see the mistake, not a screenful.
  constexpr size_t kShown = 8;
  std::vector<uint32_t> pids(stats.filtered_pids.begin(), stats.filtered_pids.end());
  std::sort(pids.begin(), pids.end());
  std::string list;
  for (size_t i = 0; i < pids.size() && i < kShown; ++i)
    list += fmt::format("{}{}", i ? ", " : "", pids[i]);
  if (pids.size() > kShown) list += fmt::format(" and {} more", pids.size() - kShown);
  std::string window;
  if (info.window_start_ns > 0 && info.window_end_ns > info.window_start_ns) {
    window = fmt::format(
        " in a window of {}",
        FormatDurationNs(static_cast<int64_t>(info.window_end_ns - info.window_start_ns)));
  }
  return NotFound(fmt::format("no samples match {} in record {} (it holds {} samples of {} {}{})",
                              FilterText(), info.id, stats.filtered,
                              pids.size() == 1 ? "pid" : "pids", list, window));
}

std::string FormatTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& raw_rows) {
  std::vector<std::vector<std::string>> rows;
  rows.reserve(raw_rows.size());
  for (const auto& r : raw_rows) {
    std::vector<std::string> row;
    for (const auto& cell : r) row.push_back(EscapeForTerminal(cell));
    rows.push_back(std::move(row));
  }
  std::vector<size_t> width(header.size());
  for (size_t i = 0; i < header.size(); ++i) width[i] = header[i].size();
  for (const auto& r : rows) {
    for (size_t i = 0; i < r.size() && i < width.size(); ++i)
      width[i] = std::max(width[i], r[i].size());
  }
  std::string out;
  auto line = [&](const std::vector<std::string>& r) {
    for (size_t i = 0; i < r.size(); ++i) {
      out += r[i];
      if (i + 1 < r.size()) out += std::string(width[i] - r[i].size() + 2, ' ');
    }
    out += '\n';
  };
  line(header);
  for (const auto& r : rows) line(r);
  return out;
}

}  // namespace flightrec::recorder::cli
