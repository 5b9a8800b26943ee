#include "recorder/daemon/oom_watch.h"

#include <fcntl.h>
#include <linux/perf_event.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/checked_json.h"
#include "recorder/daemon/perf_ring.h"

namespace flightrec::recorder {
namespace {

constexpr size_t kRingPages = 8;    // per CPU: an OOM kill is rare, a storm of them ~300 records
constexpr size_t kMaxKills = 1024;  // victims awaiting their exit
constexpr size_t kMaxFieldOffset = 65536;
constexpr size_t kMaxCgroupFile = 4096;  // memory.events, oom_control: a few lines
constexpr size_t kMaxKmsgRecord = 8192;  // the kernel's own limit is ~1 KiB a line
// v1's "no limit": PAGE_COUNTER_MAX pages, rounded (mm/memcontrol-v1.c).
constexpr uint64_t kV1Unlimited = 0x7ffffffffffff000ull;

std::optional<uint64_t> ParseU64(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.remove_suffix(1);
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

std::optional<int64_t> ParseI64(std::string_view s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

uint64_t ReadRaw(std::string_view raw, const TracepointField& f) {
  uint64_t v = 0;
  std::memcpy(&v, raw.data() + f.offset, std::min<size_t>(f.size, 8));
  return v;
}

// "key value" lines (memory.events, memory.oom_control), at most 32.
std::map<std::string, uint64_t> KeyValues(const std::string& text) {
  std::map<std::string, uint64_t> out;
  size_t pos = 0;
  while (pos < text.size() && out.size() < 32) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    std::string_view line(text.data() + pos, nl - pos);
    size_t sp = line.find(' ');
    if (sp != std::string_view::npos && sp > 0 && sp <= 64) {
      if (auto v = ParseU64(line.substr(sp + 1))) out[std::string(line.substr(0, sp))] = *v;
    }
    pos = nl + 1;
  }
  return out;
}

bool SafeCgroupPath(std::string_view p) {
  if (p.empty() || p[0] != '/' || p.size() > 4096 || p.find('\0') != std::string_view::npos)
    return false;
  size_t pos = 1;
  while (pos <= p.size()) {
    size_t slash = p.find('/', pos);
    if (slash == std::string_view::npos) slash = p.size();
    std::string_view part = p.substr(pos, slash - pos);
    if (part == "." || part == "..") return false;
    pos = slash + 1;
  }
  return true;
}

}  // namespace

StatusOr<MarkVictimLayout> ParseMarkVictimFormat(const std::string& format) {
  MarkVictimLayout l;
  auto need = [&](const char* name, size_t size, TracepointField* out) -> Status {
    auto f = FindTracepointField(format, name);
    if (!f) return InvalidArgument(fmt::format("oom:mark_victim's format has no field '{}'", name));
    if (f->size != size || f->offset > kMaxFieldOffset) {
      return InvalidArgument(fmt::format(
          "oom:mark_victim's field '{}' is {} bytes at offset {} (expected {} bytes below {})",
          name, f->size, f->offset, size, kMaxFieldOffset));
    }
    *out = *f;
    l.min_size = std::max(l.min_size, f->offset + f->size);
    return OkStatus();
  };
  RETURN_IF_ERROR(need("pid", 4, &l.pid));
  RETURN_IF_ERROR(need("comm", 4, &l.comm));  // __data_loc: u16 offset, u16 length
  RETURN_IF_ERROR(need("total_vm", 8, &l.total_vm));
  RETURN_IF_ERROR(need("anon_rss", 8, &l.anon_rss));
  RETURN_IF_ERROR(need("file_rss", 8, &l.file_rss));
  RETURN_IF_ERROR(need("shmem_rss", 8, &l.shmem_rss));
  RETURN_IF_ERROR(need("oom_score_adj", 2, &l.oom_score_adj));
  // Newer than the rest (6.x): optional, but checked when present.
  for (auto [name, size, out] :
       {std::tuple{"uid", size_t{4}, &l.uid}, std::tuple{"pgtables", size_t{8}, &l.pgtables}}) {
    if (!FindTracepointField(format, name)) continue;
    TracepointField f;
    RETURN_IF_ERROR(need(name, size, &f));
    *out = f;
  }
  return l;
}

StatusOr<OomVictim> DecodeMarkVictim(const MarkVictimLayout& l, std::string_view raw) {
  if (raw.size() < l.min_size) {
    return Corrupt(fmt::format("oom:mark_victim record of {} bytes, shorter than its fields ({})",
                               raw.size(), l.min_size));
  }
  OomVictim v;
  v.pid = static_cast<int32_t>(ReadRaw(raw, l.pid));
  if (v.pid <= 0) return Corrupt(fmt::format("oom:mark_victim names pid {}", v.pid));
  const uint32_t loc = static_cast<uint32_t>(ReadRaw(raw, l.comm));
  const size_t off = loc & 0xffff, len = loc >> 16;
  if (off > raw.size() || len > raw.size() - off) {
    return Corrupt(fmt::format("oom:mark_victim's comm ({} bytes at {}) is outside its {} bytes",
                               len, off, raw.size()));
  }
  v.comm.assign(raw.data() + off, strnlen(raw.data() + off, std::min<size_t>(len, 16)));
  v.total_vm_kb = ReadRaw(raw, l.total_vm);
  v.anon_rss_kb = ReadRaw(raw, l.anon_rss);
  v.file_rss_kb = ReadRaw(raw, l.file_rss);
  v.shmem_rss_kb = ReadRaw(raw, l.shmem_rss);
  v.oom_score_adj = static_cast<int16_t>(ReadRaw(raw, l.oom_score_adj));
  if (l.uid) v.uid = static_cast<uint32_t>(ReadRaw(raw, *l.uid));
  if (l.pgtables) v.pgtables_kb = ReadRaw(raw, *l.pgtables);
  return v;
}

StatusOr<std::optional<OomKmsgLine>> ParseOomKmsgRecord(std::string_view rec) {
  const size_t semi = rec.find(';');
  if (semi == std::string_view::npos) return std::optional<OomKmsgLine>();
  // PRI = facility << 3 | level; userspace writes never get facility 0
  // (kernel/printk/printk.c devkmsg_write).
  const size_t comma = rec.find(',');
  auto pri = ParseU64(rec.substr(0, std::min(comma, semi)));
  if (!pri || (*pri >> 3) != 0) return std::optional<OomKmsgLine>();
  std::string_view msg = rec.substr(semi + 1);
  msg = msg.substr(0, msg.find('\n'));
  constexpr std::string_view kHead = "oom-kill:constraint=";
  if (msg.substr(0, kHead.size()) != kHead) return std::optional<OomKmsgLine>();
  OomKmsgLine k;
  std::string_view c = msg.substr(kHead.size());
  c = c.substr(0, c.find(','));
  if (c == "CONSTRAINT_NONE")
    k.constraint = "global";
  else if (c == "CONSTRAINT_CPUSET")
    k.constraint = "cpuset";
  else if (c == "CONSTRAINT_MEMORY_POLICY")
    k.constraint = "memory_policy";
  else if (c == "CONSTRAINT_MEMCG")
    k.constraint = "memcg";
  else
    return Corrupt(fmt::format("kmsg oom-kill line: unknown constraint '{}'", c.substr(0, 64)));
  // pid and uid are the last fields, after the comm (anyone's choice).
  const size_t u = msg.rfind(",uid=");
  const size_t p = u == std::string_view::npos ? u : msg.rfind(",pid=", u);
  if (p == std::string_view::npos) return Corrupt("kmsg oom-kill line without ,pid= and ,uid=");
  auto pid = ParseI64(msg.substr(p + 5, u - p - 5));
  auto uid = ParseI64(msg.substr(u + 5));
  if (!pid || *pid <= 0 || *pid > INT32_MAX || !uid || *uid < 0 || *uid > UINT32_MAX) {
    return Corrupt("kmsg oom-kill line: pid or uid is not a number in range");
  }
  k.pid = static_cast<int32_t>(*pid);
  k.uid = *uid;
  constexpr std::string_view kMemcg = ",oom_memcg=", kTask = ",task_memcg=";
  const size_t m = msg.find(kMemcg);
  if (m != std::string_view::npos) {
    const size_t t = msg.find(kTask, m);
    // A cgroup name could hold either marker: then which is which is unknown.
    k.memcg_ambiguous = t == std::string_view::npos ||
                        msg.find(kMemcg, m + 1) != std::string_view::npos ||
                        msg.find(kTask, t + 1) != std::string_view::npos;
    if (!k.memcg_ambiguous) {
      std::string_view path = msg.substr(m + kMemcg.size(), t - m - kMemcg.size());
      if (SafeCgroupPath(path))
        k.oom_memcg = std::string(path);
      else
        k.memcg_ambiguous = true;
    }
  }
  return std::optional<OomKmsgLine>(std::move(k));
}

CgroupRoots FindCgroupRoots() {
  CgroupRoots r;
  if (access("/sys/fs/cgroup/memory/memory.limit_in_bytes", R_OK) == 0 ||
      access("/sys/fs/cgroup/memory/memory.usage_in_bytes", R_OK) == 0) {
    r.v1_memory = "/sys/fs/cgroup/memory";
  }
  for (const char* root : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}) {
    const std::string c = ReadFilePrefix(std::string(root) + "/cgroup.controllers", 4096);
    if ((" " + c + " ").find(" memory") != std::string::npos) {
      r.v2 = root;
      break;
    }
  }
  return r;
}

std::optional<std::string> MemoryCgroupOf(std::string_view text, bool v1) {
  size_t pos = 0;
  for (int lines = 0; pos < text.size() && lines < 64; ++lines) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    const size_t a = line.find(':');
    const size_t b = a == std::string_view::npos ? a : line.find(':', a + 1);
    if (b == std::string_view::npos) continue;
    std::string_view ctl = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    bool match = false;
    if (v1) {
      for (size_t s = 0; s <= ctl.size();) {
        size_t e = ctl.find(',', s);
        if (e == std::string_view::npos) e = ctl.size();
        match |= ctl.substr(s, e - s) == "memory";
        s = e + 1;
      }
    } else {
      match = line.substr(0, a) == "0" && ctl.empty();
    }
    if (match) return SafeCgroupPath(path) ? std::optional<std::string>(path) : std::nullopt;
  }
  return std::nullopt;
}

MemcgFigures ReadMemcgFigures(const CgroupRoots& roots, const std::string& path) {
  MemcgFigures m;
  m.path = path;
  if (!SafeCgroupPath(path)) {
    m.error = "not a cgroup path";
    return m;
  }
  const bool v1 = !roots.v1_memory.empty();
  const std::string dir = (v1 ? roots.v1_memory : roots.v2) + (path == "/" ? "" : path) + "/";
  if (!v1 && roots.v2.empty()) {
    m.error = "no memory controller mounted (cgroup v1 memory or v2 with memory)";
    return m;
  }
  m.version = v1 ? "v1" : "v2";
  auto num = [&](const char* file) { return ParseU64(ReadFilePrefix(dir + file, 64)); };
  if (v1) {
    m.limit_bytes = num("memory.limit_in_bytes");
    if (m.limit_bytes && *m.limit_bytes >= kV1Unlimited) m.limit_bytes.reset();
    m.usage_bytes = num("memory.usage_in_bytes");
    m.peak_bytes = num("memory.max_usage_in_bytes");
    m.failcnt = num("memory.failcnt");
    m.events = KeyValues(ReadFilePrefix(dir + "memory.oom_control", kMaxCgroupFile));
  } else {
    m.limit_bytes = num("memory.max");  // "max": unset
    m.usage_bytes = num("memory.current");
    m.peak_bytes = num("memory.peak");
    m.events = KeyValues(ReadFilePrefix(dir + "memory.events", kMaxCgroupFile));
  }
  if (!m.usage_bytes && m.events.empty()) m.error = "the cgroup's files could not be read (gone?)";
  return m;
}

nlohmann::json OomJson(const OomKill& k) {
  const OomVictim& v = k.victim;
  nlohmann::json j = {{"version", 1},
                      {"victim_pid", v.pid},
                      {"total_vm_kb", v.total_vm_kb},
                      {"anon_rss_kb", v.anon_rss_kb},
                      {"file_rss_kb", v.file_rss_kb},
                      {"shmem_rss_kb", v.shmem_rss_kb},
                      {"oom_score_adj", v.oom_score_adj},
                      {"time_mono_ns", v.time_ns},
                      {"constraint", k.kmsg ? k.kmsg->constraint : "unknown"},
                      {"notes", nlohmann::json::array()}};
  json::SetText(j, "victim_comm", v.comm);
  if (v.uid >= 0) j["victim_uid"] = v.uid;
  if (v.pgtables_kb) j["pgtables_kb"] = *v.pgtables_kb;
  if (!k.kmsg) {
    j["notes"].push_back(
        "the kernel's oom-kill line was not read (rate-limited, or /dev/kmsg unavailable): "
        "the constraint is unknown");
  } else if (k.kmsg->memcg_ambiguous) {
    j["notes"].push_back("the kernel's oom_memcg could not be told from the names around it");
  }
  nlohmann::json t = {
      {"pid", v.trigger_pid}, {"tid", v.trigger_tid}, {"is_victim", v.trigger_pid == v.pid}};
  json::SetText(t, "comm", v.trigger_comm);
  if (v.trigger_uid >= 0) t["uid"] = v.trigger_uid;
  j["trigger"] = std::move(t);
  const MemcgFigures& m = k.memcg;
  nlohmann::json mj = {{"version", m.version}};
  json::SetText(mj, "path", m.path);
  if (m.limit_bytes) mj["limit_bytes"] = *m.limit_bytes;
  if (m.usage_bytes) mj["usage_bytes"] = *m.usage_bytes;
  if (m.peak_bytes) mj["peak_bytes"] = *m.peak_bytes;
  if (m.failcnt) mj["failcnt"] = *m.failcnt;
  mj["events"] = m.events;
  if (!m.error.empty()) mj["error"] = m.error;
  j["memcg"] = std::move(mj);
  return j;
}

StatusOr<std::unique_ptr<OomWatch>> OomWatch::Create() {
  std::unique_ptr<OomWatch> w(new OomWatch());
  ASSIGN_OR_RETURN(std::string dir, TracepointDir("oom", "mark_victim"));
  ASSIGN_OR_RETURN(w->layout_, ParseMarkVictimFormat(ReadFilePrefix(dir + "/format", 64 << 10)));
  ASSIGN_OR_RETURN(w->cpus_, OpenTracepointOnCpus(dir, nullptr, kRingPages));
  w->roots_ = FindCgroupRoots();
  w->kmsg_.reset(open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!w->kmsg_) {
    w->kmsg_unavailable_ = fmt::format("/dev/kmsg: {}", std::strerror(errno));
  } else {
    lseek(w->kmsg_.get(), 0, SEEK_END);  // only kills from now on
  }
  return w;
}

std::vector<int> OomWatch::fds() const {
  std::vector<int> out;
  if (kmsg_) out.push_back(kmsg_.get());
  for (const auto& c : cpus_) out.push_back(c.fd.get());
  return out;
}

void OomWatch::ReadKmsg() {
  if (!kmsg_) return;
  std::string buf(kMaxKmsgRecord, '\0');
  for (int i = 0; i < 4096; ++i) {  // one record per read; bounded per poll
    ssize_t n = read(kmsg_.get(), buf.data(), buf.size());
    if (n < 0 && (errno == EINTR || errno == EPIPE)) continue;  // EPIPE: overwritten, skipped
    if (n <= 0) break;
    auto line = ParseOomKmsgRecord(std::string_view(buf.data(), static_cast<size_t>(n)));
    if (!line.ok()) {
      ++kmsg_malformed_;
      last_error_ = line.status().message();
      spdlog::warn("oom watch: {}", last_error_);
      continue;
    }
    if (!*line) continue;
    if (kmsg_lines_.size() >= kMaxKills) kmsg_lines_.erase(kmsg_lines_.begin());
    kmsg_lines_[(*line)->pid] = std::move(**line);
  }
}

void OomWatch::OnVictim(std::string_view raw, int32_t pid, int32_t tid, uint64_t time_ns) {
  auto v = DecodeMarkVictim(layout_, raw);
  if (!v.ok()) {
    ++malformed_;
    last_error_ = v.status().message();
    spdlog::warn("oom watch: {}", last_error_);
    return;
  }
  ++victims_seen_;
  v->trigger_pid = pid;
  v->trigger_tid = tid;
  v->time_ns = time_ns;
  v->trigger_comm = ReadFilePrefix(fmt::format("/proc/{}/comm", pid), 64);
  if (!v->trigger_comm.empty() && v->trigger_comm.back() == '\n') v->trigger_comm.pop_back();
  const std::string status = ReadFilePrefix(fmt::format("/proc/{}/status", pid), 16 << 10);
  if (size_t at = status.find("\nUid:\t"); at != std::string::npos) {
    v->trigger_uid = std::strtoll(status.c_str() + at + 6, nullptr, 10);
  }
  // A victim whose exit never came (the connector overran) must not hold
  // its slot for ever: the oldest goes, counted.
  if (kills_.size() >= kMaxKills) {
    auto oldest = std::min_element(kills_.begin(), kills_.end(), [](const auto& a, const auto& b) {
      return a.second.victim.time_ns < b.second.victim.time_ns;
    });
    kills_.erase(oldest);
    ++dropped_;
  }
  OomKill k;
  k.victim = std::move(*v);
  // The victim is being killed, not yet reaped: /proc still has its cgroup.
  const std::string cg = ReadFilePrefix(fmt::format("/proc/{}/cgroup", k.victim.pid), 16 << 10);
  k.victim_cgroup = MemoryCgroupOf(cg, !roots_.v1_memory.empty()).value_or("");
  ReadFigures(&k);
  kills_[k.victim.pid] = std::move(k);
}

void OomWatch::Poll() {
  ReadKmsg();
  for (auto& c : cpus_) {
    DrainPerfRing(c.ring, [&](const perf_event_header& hdr, const std::vector<uint8_t>& body) {
      if (hdr.type == PERF_RECORD_LOST && body.size() >= 16) {
        uint64_t lost = 0;
        std::memcpy(&lost, body.data() + 8, 8);
        lost_ += lost;
      }
      // PERF_SAMPLE_TID | TIME | RAW: u32 pid, tid; u64 time; u32 size; raw.
      if (hdr.type != PERF_RECORD_SAMPLE || body.size() < 20) return;
      int32_t pid = 0, tid = 0;
      uint64_t time = 0;
      uint32_t size = 0;
      std::memcpy(&pid, body.data(), 4);
      std::memcpy(&tid, body.data() + 4, 4);
      std::memcpy(&time, body.data() + 8, 8);
      std::memcpy(&size, body.data() + 16, 4);
      if (size > body.size() - 20) size = static_cast<uint32_t>(body.size() - 20);
      OnVictim(std::string_view(reinterpret_cast<const char*>(body.data()) + 20, size), pid, tid,
               time);
    });
  }
}

void OomWatch::AttachKmsg(OomKill* k) {
  auto line = kmsg_lines_.find(k->victim.pid);
  if (line == kmsg_lines_.end()) return;
  k->kmsg = std::move(line->second);
  kmsg_lines_.erase(line);
}

// Read as soon as the kill is seen: by the victim's exit the reaper has
// freed its memory, and usage says little.
void OomWatch::ReadFigures(OomKill* k) {
  AttachKmsg(k);
  // The cgroup the kernel names, if it is the victim's or one of its
  // ancestors (a limit set above the victim's own group); else the victim's.
  // A victim read after it exited says "/": cgroup_exit() moves an exiting
  // task to the root css_set (kernel/cgroup/cgroup.c), so then only the
  // kernel's own line still names its memcg.
  std::string path = k->victim_cgroup;
  if (k->kmsg && !k->kmsg->oom_memcg.empty()) {
    const std::string& m = k->kmsg->oom_memcg;
    if (path.empty() || path == "/" || m == "/" || path == m || path.rfind(m + "/", 0) == 0) {
      path = m;
    }
  }
  if (path.empty()) {
    k->memcg.error = "the victim's memory cgroup was not read (gone before the watch saw it)";
  } else {
    k->memcg = ReadMemcgFigures(roots_, path);
  }
}

std::optional<OomKill> OomWatch::Take(int32_t pid) {
  auto it = kills_.find(pid);
  if (it == kills_.end()) return std::nullopt;
  OomKill k = std::move(it->second);
  kills_.erase(it);
  if (!k.kmsg) {
    ReadKmsg();
    AttachKmsg(&k);
    // The figures were read from a cgroup that may have been the root's
    // (the victim already exiting); the kernel's line names the right one.
    if (k.kmsg && k.memcg.path != k.kmsg->oom_memcg &&
        (k.memcg.path.empty() || k.memcg.path == "/")) {
      ReadFigures(&k);
    }
  }
  return k;
}

nlohmann::json OomWatch::Status() const {
  nlohmann::json j = {{"mechanism", "oom:mark_victim + /dev/kmsg oom-kill line"},
                      {"victims_seen", victims_seen_},
                      {"malformed_records", malformed_},
                      {"malformed_kmsg_lines", kmsg_malformed_},
                      {"records_lost", lost_},
                      {"victims_dropped", dropped_},
                      {"cgroup_v1_memory", roots_.v1_memory},
                      {"cgroup_v2", roots_.v2}};
  if (!kmsg_unavailable_.empty()) j["kmsg_unavailable"] = kmsg_unavailable_;
  if (!last_error_.empty()) j["last_error"] = last_error_;
  return j;
}

}  // namespace flightrec::recorder
