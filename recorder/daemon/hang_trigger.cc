#include "recorder/daemon/hang_trigger.h"

#include <limits.h>
#include <unistd.h>

#include <fmt/format.h>

#include "common/cgroup.h"
#include "common/checked_json.h"
#include "common/read_file.h"
#include "common/units.h"

namespace flightrec::recorder {
namespace {

constexpr int64_t kMinBlockedNs = 1'000'000;

// "\nKey:\t123" in a /proc status text.
std::optional<uint64_t> StatusNumber(const std::string& status, const char* key) {
  const size_t at = status.find(key);
  if (at == std::string::npos) return std::nullopt;
  const char* p = status.c_str() + at + std::char_traits<char>::length(key);
  char* end = nullptr;
  const unsigned long long v = std::strtoull(p, &end, 10);
  if (end == p) return std::nullopt;
  return v;
}

std::optional<std::string> ProcStatus(uint32_t tid) {
  auto s = ReadFileToString(fmt::format("/proc/{}/status", tid), 64u << 10);
  if (!s.ok()) return std::nullopt;
  return "\n" + *s;
}

// A path or name from a peer: bounded, no NUL (it is compared with what the
// kernel shows, which never holds one).
Status CheckText(const nlohmann::json& v, const char* name, size_t max, bool absolute) {
  if (!v.is_string()) return InvalidArgument(fmt::format("{} must be a string", name));
  const auto& s = v.get_ref<const std::string&>();
  if (s.empty() || s.size() > max || s.find('\0') != std::string::npos) {
    return InvalidArgument(fmt::format("{} must be 1 to {} bytes without NUL", name, max));
  }
  if (absolute && s[0] != '/')
    return InvalidArgument(fmt::format("{} must be an absolute path", name));
  return OkStatus();
}

Status ParseKind(const nlohmann::json& p, HangSpec* s) {
  if (p.contains("blocked_ns") && p.contains("hung_task")) {
    return InvalidArgument("a trigger takes blocked_ns or hung_task, not both");
  }
  if (p.contains("hung_task")) {
    if (json::As<bool>(p["hung_task"], false) != true) {
      return InvalidArgument("hung_task must be true");
    }
    s->kind = HangSpec::Kind::kHungTask;
    return OkStatus();
  }
  const int64_t ns = json::As<int64_t>(p["blocked_ns"], -1);
  if (ns < kMinBlockedNs || ns > kMaxBlockedNs) {
    return InvalidArgument(fmt::format(
        "blocked_ns must be an integer number of nanoseconds from {} (1 ms) to {} (1 day), not {}",
        kMinBlockedNs, kMaxBlockedNs, p["blocked_ns"].dump().substr(0, 64)));
  }
  s->blocked_ns = ns;
  return OkStatus();
}

Status ParseState(const nlohmann::json& p, HangSpec* s) {
  if (!p.contains("state")) return OkStatus();
  const std::string st = json::As<std::string>(p["state"], "");
  if (st == "D" || st == "S") {
    s->states = st;
  } else if (st == "DS" || st == "SD") {
    s->states = "DS";
  } else {
    return InvalidArgument(
        "state must be \"D\", \"S\" or \"DS\" (uninterruptible, "
        "interruptible sleep, or either)");
  }
  if (s->kind == HangSpec::Kind::kHungTask && s->states != "D") {
    return InvalidArgument("hung_task: the kernel reports only tasks blocked in D");
  }
  return OkStatus();
}

Status ParseSelector(const nlohmann::json& p, HangSelector* sel) {
  const int given = p.contains("pid") + p.contains("exe") + p.contains("cgroup");
  if (given > 1) return InvalidArgument("give at most one of pid, exe, cgroup");
  if (p.contains("pid")) {
    const int64_t pid = json::As<int64_t>(p["pid"], 0);
    if (pid <= 0 || pid > INT32_MAX) return InvalidArgument("pid must be a process id (1..2^31-1)");
    sel->pid = static_cast<uint32_t>(pid);
  }
  if (p.contains("exe")) {
    RETURN_IF_ERROR(CheckText(p["exe"], "exe", PATH_MAX, true));
    sel->exe = p["exe"].get<std::string>();
  }
  if (p.contains("cgroup")) {
    RETURN_IF_ERROR(CheckText(p["cgroup"], "cgroup", cgroup::kMaxPath, false));
    sel->cgroup = p["cgroup"].get<std::string>();
  }
  return OkStatus();
}

}  // namespace

std::optional<uint32_t> HangSelector::Match(uint32_t tid) const {
  auto status = ProcStatus(tid);
  if (!status) return std::nullopt;  // gone
  auto tgid = StatusNumber(*status, "\nTgid:");
  if (!tgid || *tgid == 0 || *tgid > INT32_MAX) return std::nullopt;
  const auto pid = static_cast<uint32_t>(*tgid);
  if (this->pid != 0 && pid != this->pid) return std::nullopt;
  if (!exe.empty()) {
    char buf[PATH_MAX + 1];
    const std::string link = fmt::format("/proc/{}/exe", pid);
    const ssize_t n = readlink(link.c_str(), buf, sizeof(buf));
    if (n <= 0 || static_cast<size_t>(n) >= sizeof(buf) || std::string(buf, n) != exe) {
      return std::nullopt;
    }
  }
  if (!cgroup.empty()) {
    auto text = ReadFileToString(fmt::format("/proc/{}/cgroup", pid), 64u << 10);
    if (!text.ok()) return std::nullopt;
    const cgroup::CgroupInfo c = cgroup::ParseProcCgroup(*text);
    const bool below = c.path.size() > cgroup.size() &&
                       c.path.compare(0, cgroup.size(), cgroup) == 0 &&
                       (cgroup.back() == '/' || c.path[cgroup.size()] == '/');
    if (c.path != cgroup && !below && c.unit != cgroup) return std::nullopt;
  }
  return pid;
}

std::string HangSpec::Describe() const {
  std::string s = kind == Kind::kHungTask
                      ? std::string("hung task (kernel)")
                      : fmt::format("blocked {} in {}", FormatDurationNs(blocked_ns), states);
  if (select.pid != 0) s += fmt::format(", pid {}", select.pid);
  if (!select.exe.empty()) s += ", exe " + select.exe;
  if (!select.cgroup.empty()) s += ", cgroup " + select.cgroup;
  return s;
}

nlohmann::json HangSpec::ToJson() const {
  nlohmann::json j = {{"state", states}};
  if (kind == Kind::kBlocked) j["blocked_ns"] = blocked_ns;
  if (kind == Kind::kHungTask) j["hung_task"] = true;
  if (select.pid != 0) j["pid"] = select.pid;
  if (!select.exe.empty()) j["exe"] = select.exe;
  if (!select.cgroup.empty()) j["cgroup"] = select.cgroup;
  return j;
}

StatusOr<HangSpec> ParseHangSpec(const nlohmann::json& p) {
  HangSpec s;
  RETURN_IF_ERROR(ParseKind(p, &s));
  RETURN_IF_ERROR(ParseState(p, &s));
  RETURN_IF_ERROR(ParseSelector(p, &s.select));
  if (s.states.find('S') != std::string::npos && s.select.empty()) {
    return InvalidArgument(
        "a trigger on state S needs pid, exe or cgroup: most threads of a machine sleep in S "
        "for seconds");
  }
  return s;
}

std::vector<Hang> HangTracker::Update(const std::vector<BlockedThread>& blocked, const Match& match,
                                      bool complete) {
  if (complete) {
    // A thread no longer listed, or in another block since, ran again.
    std::unordered_map<uint32_t, uint64_t> now;
    for (const BlockedThread& b : blocked) now[b.tid] = b.since_ns;
    std::erase_if(seen_, [&](const auto& kv) {
      auto it = now.find(kv.first);
      return it == now.end() || it->second != kv.second.since_ns;
    });
  }
  std::vector<Hang> hangs;
  std::unordered_map<uint32_t, bool> fired;  // processes with a hang in this update
  for (const BlockedThread& b : blocked) {
    auto it = seen_.find(b.tid);
    if (it != seen_.end() && it->second.since_ns == b.since_ns) continue;
    if (seen_.size() >= kMaxSeen && it == seen_.end()) seen_.clear();
    const uint32_t pid = match(b.tid).value_or(0);
    seen_[b.tid] = {b.since_ns, pid};
    if (pid == 0) continue;
    // Another thread of the process already in this hang (complete: every
    // entry left is still in its block): the same hang.
    bool known = fired.count(pid) != 0;
    for (auto s = seen_.begin(); complete && !known && s != seen_.end(); ++s) {
      known = s->first != b.tid && s->second.pid == pid;
    }
    if (known) continue;
    fired[pid] = true;
    hangs.push_back({pid, b.tid, b.since_ns, b.state});
  }
  return hangs;
}

std::optional<uint64_t> ContextSwitches(uint32_t tid) {
  auto status = ProcStatus(tid);
  if (!status) return std::nullopt;
  auto v = StatusNumber(*status, "\nvoluntary_ctxt_switches:");
  auto n = StatusNumber(*status, "\nnonvoluntary_ctxt_switches:");
  if (!v || !n) return std::nullopt;
  return *v + *n;
}

}  // namespace flightrec::recorder
