#include "recorder/attribution/process_labels.h"

#include <unistd.h>

#include <charconv>

#include <fmt/format.h>

#include "common/checked_json.h"
#include "common/read_file.h"

namespace flightrec::recorder::attribution {
namespace {

// /proc/PID/cgroup lists one line per hierarchy (about 13 on v1); a status
// text is about 1.5 KiB. Larger is no text of these files.
constexpr size_t kMaxCgroupText = 64 << 10;
constexpr size_t kMaxStatusText = 64 << 10;

uint64_t ReadNamespace(uint32_t pid, const char* name) {
  char buf[64];
  std::string path = fmt::format("/proc/{}/ns/{}", pid, name);
  ssize_t n = readlink(path.c_str(), buf, sizeof(buf));
  return n > 0 && static_cast<size_t>(n) < sizeof(buf)
             ? NamespaceInode(std::string_view(buf, static_cast<size_t>(n)))
             : 0;
}

}  // namespace

uint64_t NamespaceInode(std::string_view link) {
  size_t open = link.find(":[");
  if (open == std::string_view::npos || !link.ends_with(']')) return 0;
  std::string_view digits = link.substr(open + 2, link.size() - open - 3);
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  return ec == std::errc() && end == digits.data() + digits.size() ? v : 0;
}

uint32_t NamespacePid(std::string_view status) {
  size_t at = status.starts_with("NSpid:") ? 0 : status.find("\nNSpid:");
  if (at == std::string_view::npos) return 0;
  std::string_view line = status.substr(at + (at ? 7 : 6));
  line = line.substr(0, line.find('\n'));
  uint32_t last = 0;
  for (size_t pos = 0; pos < line.size();) {
    pos = line.find_first_not_of(" \t", pos);
    if (pos == std::string_view::npos) break;
    uint32_t v = 0;
    auto [end, ec] = std::from_chars(line.data() + pos, line.data() + line.size(), v);
    if (ec != std::errc() || end == line.data() + pos) return 0;
    last = v;
    pos = static_cast<size_t>(end - line.data());
  }
  return last;
}

std::optional<ProcessLabels> ReadProcessLabels(uint32_t pid) {
  auto text = ReadFileToString(fmt::format("/proc/{}/cgroup", pid), kMaxCgroupText);
  if (!text.ok()) return std::nullopt;
  ProcessLabels l;
  l.cgroup = cgroup::ParseProcCgroup(*text);
  l.pid_ns = ReadNamespace(pid, "pid");
  l.user_ns = ReadNamespace(pid, "user");
  if (auto status = ReadFileToString(fmt::format("/proc/{}/status", pid), kMaxStatusText);
      status.ok()) {
    l.ns_pid = NamespacePid(*status);
  }
  return l;
}

void AddLabelsToJson(const ProcessLabels& l, nlohmann::json* process) {
  cgroup::AddCgroupToJson(l.cgroup, process);
  nlohmann::json& p = *process;
  if (l.pid_ns) p["pid_ns"] = l.pid_ns;
  if (l.user_ns) p["user_ns"] = l.user_ns;
  if (l.ns_pid) p["ns_pid"] = l.ns_pid;
}

ProcessLabels LabelsFromJson(const nlohmann::json& p) {
  ProcessLabels l;
  l.cgroup = cgroup::CgroupFromJson(p);
  l.pid_ns = json::Get<uint64_t>(p, "pid_ns", 0);
  l.user_ns = json::Get<uint64_t>(p, "user_ns", 0);
  l.ns_pid = json::Get<uint32_t>(p, "ns_pid", 0);
  return l;
}

std::unordered_map<uint32_t, ProcessLabels> LabelsByPid(const nlohmann::json& meta) {
  std::unordered_map<uint32_t, ProcessLabels> out;
  for (const auto& p : json::Array(meta, "processes")) {
    ProcessLabels l = LabelsFromJson(p);
    if (l.cgroup.path.empty() && l.ns_pid == 0) continue;
    out.emplace(json::Get<uint32_t>(p, "pid", 0), std::move(l));
  }
  return out;
}

void LabelCache::Observe(const Event& e) {
  if (const auto* c = std::get_if<CommEvent>(&e); c != nullptr && c->exec) {
    Entry& entry = procs_[c->pid];
    entry = Entry{};
    if (auto l = ReadProcessLabels(c->pid)) entry.labels = std::move(*l);
  } else if (const auto* t = std::get_if<TaskEvent>(&e); t != nullptr && t->pid == t->tid) {
    if (t->exit) {
      if (auto it = procs_.find(t->pid); it != procs_.end()) {
        it->second.exited = true;
        it->second.exit_ns = t->time_ns;
      }
    } else if (t->pid != t->ppid) {
      // A new process (a new thread has pid == ppid): its parent's labels.
      auto parent = procs_.find(t->ppid);
      procs_[t->pid] = Entry{parent != procs_.end() ? parent->second.labels : ProcessLabels{}};
    }
  }
}

std::optional<ProcessLabels> LabelCache::Labels(uint32_t pid, bool exited) {
  if (!exited && pid != 0) {
    if (auto l = ReadProcessLabels(pid)) return l;
  }
  auto it = procs_.find(pid);
  if (it == procs_.end()) return std::nullopt;
  return it->second.labels;
}

void LabelCache::Trim(uint64_t cutoff_ns) {
  std::erase_if(procs_,
                [&](const auto& kv) { return kv.second.exited && kv.second.exit_ns < cutoff_ns; });
}

}  // namespace flightrec::recorder::attribution
