#include "recorder/daemon/death_watch.h"

#include <fcntl.h>
#include <linux/cn_proc.h>
#include <linux/connector.h>
#include <linux/netlink.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/read_file.h"
#include "recorder/daemon/perf_ring.h"
#include "recorder/daemon/tracepoint_format.h"
#include "recorder/perf/perf_event.h"

namespace flightrec::recorder {
namespace {

constexpr size_t kMaxInfos = 65536;   // processes whose metadata is held
constexpr size_t kMaxSenders = 4096;  // signals awaiting their target's exit
constexpr uint64_t kSenderMaxAgeNs = 30'000'000'000;
constexpr uint32_t kRingPages = 16;  // per CPU: ~800 signals between drains
constexpr int kConnectorRcvbuf = 8 << 20;

// What process-directed signals the tracepoint keeps: those whose default
// action ends the process (signal(7)); a handled one costs a sample, never a
// record (no exit follows).
constexpr const char* kFatalSignalFilter =
    "sig != 17 && sig != 18 && sig != 19 && sig != 20 && sig != 21 && sig != 22 && sig != 23 && "
    "sig != 28";

int64_t StatusField(const std::string& status, const char* key) {
  size_t at = status.find(key);
  if (at == std::string::npos) return -1;
  return std::strtoll(status.c_str() + at + std::strlen(key), nullptr, 10);
}

DeathProcessInfo ReadProcessInfo(int32_t pid, const char* source) {
  DeathProcessInfo i;
  i.source = source;
  const std::string dir = fmt::format("/proc/{}/", pid);
  i.cmdline = ReadFilePrefix(dir + "cmdline", kMaxDeathText);
  std::replace(i.cmdline.begin(), i.cmdline.end(), '\0', ' ');
  while (!i.cmdline.empty() && i.cmdline.back() == ' ') i.cmdline.pop_back();
  i.comm = ReadFilePrefix(dir + "comm", 64);
  if (!i.comm.empty() && i.comm.back() == '\n') i.comm.pop_back();
  i.cgroup = ReadFilePrefix(dir + "cgroup", kMaxDeathText);
  while (!i.cgroup.empty() && i.cgroup.back() == '\n') i.cgroup.pop_back();
  char exe[PATH_MAX];
  ssize_t n = readlink((dir + "exe").c_str(), exe, sizeof(exe));
  if (n > 0) i.exe.assign(exe, std::min<size_t>(static_cast<size_t>(n), kMaxDeathText));
  const std::string status = ReadFilePrefix(dir + "status", 16 << 10);
  i.uid = StatusField(status, "\nUid:");
  i.gid = StatusField(status, "\nGid:");
  i.ppid = StatusField(status, "\nPPid:");
  return i;
}

}  // namespace

bool IsCoreSignal(int sig) {
  switch (sig) {
    case SIGQUIT:
    case SIGILL:
    case SIGTRAP:
    case SIGABRT:
    case SIGBUS:
    case SIGFPE:
    case SIGSEGV:
    case SIGXCPU:
    case SIGXFSZ:
    case SIGSYS:
      return true;
    default:
      return false;
  }
}

StatusOr<std::unique_ptr<DeathWatch>> DeathWatch::Create() {
  std::unique_ptr<DeathWatch> w(new DeathWatch());
  w->nl_.reset(socket(PF_NETLINK, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_CONNECTOR));
  if (!w->nl_) return ErrnoStatus("death watch: NETLINK_CONNECTOR socket");
  // A burst of exits must not overflow the socket before the loop reads it.
  if (setsockopt(w->nl_.get(), SOL_SOCKET, SO_RCVBUFFORCE, &kConnectorRcvbuf,
                 sizeof(kConnectorRcvbuf)) != 0) {
    (void)setsockopt(w->nl_.get(), SOL_SOCKET, SO_RCVBUF, &kConnectorRcvbuf,
                     sizeof(kConnectorRcvbuf));
  }
  sockaddr_nl sa{};
  sa.nl_family = AF_NETLINK;
  sa.nl_groups = CN_IDX_PROC;
  if (bind(w->nl_.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    return ErrnoStatus("death watch: binding the process-events connector (needs root)");
  }
  // nlmsghdr, cn_msg, then the operation (cn_msg ends in a flexible array).
  alignas(nlmsghdr) char msg[NLMSG_LENGTH(sizeof(cn_msg) + sizeof(uint32_t))] = {};
  auto* nh = reinterpret_cast<nlmsghdr*>(msg);
  nh->nlmsg_len = sizeof(msg);
  nh->nlmsg_type = NLMSG_DONE;
  auto* cn = static_cast<cn_msg*>(NLMSG_DATA(nh));
  cn->id.idx = CN_IDX_PROC;
  cn->id.val = CN_VAL_PROC;
  cn->len = sizeof(uint32_t);
  const uint32_t op = PROC_CN_MCAST_LISTEN;
  std::memcpy(cn->data, &op, sizeof(op));
  if (send(w->nl_.get(), msg, sizeof(msg), 0) != static_cast<ssize_t>(sizeof(msg))) {
    return ErrnoStatus("death watch: PROC_CN_MCAST_LISTEN");
  }
  w->OpenTracepoint();
  w->ScanProc();
  return w;
}

DeathWatch::~DeathWatch() = default;

void DeathWatch::OpenTracepoint() {
  auto dir = TracepointDir("signal", "signal_generate");
  if (!dir.ok()) {
    sender_unavailable_ = dir.status().message();
    return;
  }
  const std::string format = ReadFilePrefix(*dir + "/format", 64 << 10);
  auto sig = FindTracepointField(format, "sig"), code = FindTracepointField(format, "code"),
       pid = FindTracepointField(format, "pid");
  if (!sig || !code || !pid) {
    sender_unavailable_ = "signal_generate's format has no sig, code or pid field";
    return;
  }
  fields_ = {sig->offset, code->offset, pid->offset,
             std::max({sig->offset, code->offset, pid->offset}) + 4};
  auto rings = OpenTracepointOnCpus(*dir, kFatalSignalFilter, kRingPages);
  if (!rings.ok()) {
    sender_unavailable_ = "signal_generate: " + rings.status().message();
    return;
  }
  for (auto& r : *rings) cpus_.push_back({std::move(r.fd), std::move(r.ring)});
}

// Every process alive now: none of them will exec again to be read.
void DeathWatch::ScanProc() {
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const long pid = std::strtol(name.c_str(), nullptr, 10);
    if (pid > 0 && pid <= INT32_MAX)
      Remember(static_cast<int32_t>(pid), ReadProcessInfo(pid, "scan"));
  }
}

void DeathWatch::Remember(int32_t pid, DeathProcessInfo info) {
  auto it = infos_.find(pid);
  if (it != infos_.end()) {
    it->second = std::move(info);
    return;
  }
  if (infos_.size() >= kMaxInfos) {
    ++infos_dropped_;
    return;
  }
  infos_.emplace(pid, std::move(info));
}

std::vector<int> DeathWatch::fds() const {
  std::vector<int> out = {nl_.get()};
  for (const auto& c : cpus_) out.push_back(c.fd.get());
  return out;
}

void DeathWatch::OnSignal(const std::vector<uint8_t>& body) {
  // PERF_SAMPLE_TID | TIME | RAW: u32 pid, tid; u64 time; u32 size; raw.
  if (body.size() < 20) return;
  DeathSender s;
  uint32_t raw_size = 0;
  std::memcpy(&s.pid, body.data(), 4);
  std::memcpy(&s.tid, body.data() + 4, 4);
  std::memcpy(&s.time_ns, body.data() + 8, 8);
  std::memcpy(&raw_size, body.data() + 16, 4);
  if (raw_size < fields_.size || body.size() < 20 + fields_.size) return;
  const uint8_t* raw = body.data() + 20;
  int32_t sig = 0, target = 0;
  std::memcpy(&sig, raw + fields_.sig, 4);
  std::memcpy(&s.code, raw + fields_.code, 4);
  std::memcpy(&target, raw + fields_.pid, 4);
  s.known = true;
  s.signal = sig;
  // SI_KERNEL (0x80) and positive codes (faults, timers, limits) are raised
  // by the kernel; SI_USER, SI_QUEUE, SI_TKILL (<= 0) by a process's call.
  s.kernel = s.code > 0;
  // A thread signalling itself (a fault, raise()) names its tgid.
  s.target_tgid = s.tid == target ? s.pid : 0;
  auto info = infos_.find(s.pid);
  if (info != infos_.end()) {
    s.uid = info->second.uid;
    s.comm = info->second.comm;
  } else {
    // Forked without exec since recorderd started, and still running.
    DeathProcessInfo now = ReadProcessInfo(s.pid, "signal");
    s.uid = now.uid;
    s.comm = now.comm;
  }
  auto it = senders_.find(target);
  if (it == senders_.end() && senders_.size() >= kMaxSenders) {
    ++senders_dropped_;
    return;
  }
  senders_[target] = std::move(s);
}

void DeathWatch::DrainSenders() {
  for (auto& c : cpus_) {
    DrainPerfRing(c.ring, [&](const perf_event_header& hdr, const std::vector<uint8_t>& body) {
      if (hdr.type == PERF_RECORD_SAMPLE) OnSignal(body);
      if (hdr.type == PERF_RECORD_LOST && body.size() >= 16) {
        uint64_t lost = 0;
        std::memcpy(&lost, body.data() + 8, 8);
        signal_records_lost_ += lost;
      }
    });
  }
}

void DeathWatch::OnEvent(const ::proc_event& ev, std::vector<Death>* deaths,
                         std::map<int32_t, int32_t>* tgid_of) {
  switch (ev.what) {
    case proc_event::PROC_EVENT_EXEC: {
      const int32_t pid = ev.event_data.exec.process_tgid;
      DeathProcessInfo info = ReadProcessInfo(pid, "exec");
      // Gone before it could be read (killed right after its exec): what
      // its fork inherited is still its uid and cgroup.
      if (info.uid < 0 && infos_.count(pid)) return;
      Remember(pid, std::move(info));
      return;
    }
    case proc_event::PROC_EVENT_FORK: {
      const auto& f = ev.event_data.fork;
      if (f.child_pid != f.child_tgid) return;  // a thread
      auto parent = infos_.find(f.parent_tgid);
      if (parent == infos_.end()) return;
      DeathProcessInfo copy = parent->second;
      copy.source = "fork";
      copy.ppid = f.parent_tgid;
      Remember(f.child_tgid, std::move(copy));
      return;
    }
    case proc_event::PROC_EVENT_UID: {
      auto it = infos_.find(ev.event_data.id.process_tgid);
      if (it != infos_.end()) it->second.uid = ev.event_data.id.r.ruid;
      return;
    }
    case proc_event::PROC_EVENT_COMM: {
      const auto& c = ev.event_data.comm;
      auto it = infos_.find(c.process_tgid);
      if (c.process_pid == c.process_tgid && it != infos_.end()) {
        it->second.comm.assign(c.comm, strnlen(c.comm, sizeof(c.comm)));
      }
      return;
    }
    case proc_event::PROC_EVENT_EXIT:
      break;
    default:
      return;
  }
  const auto& x = ev.event_data.exit;
  ++exits_seen_;
  if (x.process_pid != x.process_tgid) {
    (*tgid_of)[x.process_pid] = x.process_tgid;
    return;
  }
  auto info = infos_.extract(x.process_tgid);
  // do_exit's code: the signal in bits 0-6, 0x80 if the core was dumped,
  // an exit(2) status in bits 8-15 (kernel/exit.c, do_group_exit).
  const int sig = static_cast<int>(x.exit_code & 0x7f);
  if (sig == 0 || sig == 0x7f) return;
  Death d;
  d.pid = x.process_tgid;
  d.signal = sig;
  d.core_dumped = (x.exit_code & 0x80) != 0;
  d.exit_code = x.exit_code;
  d.time_ns = ev.timestamp_ns;  // ktime_get_ns(): CLOCK_MONOTONIC
  if (!info.empty()) d.info = std::move(info.mapped());
  deaths->push_back(std::move(d));
}

void DeathWatch::ReadConnector(std::vector<Death>* deaths, std::map<int32_t, int32_t>* tgid_of) {
  alignas(nlmsghdr) char buf[8192];
  for (;;) {
    sockaddr_nl from{};
    socklen_t fromlen = sizeof(from);
    ssize_t n =
        recvfrom(nl_.get(), buf, sizeof(buf), 0, reinterpret_cast<sockaddr*>(&from), &fromlen);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == ENOBUFS) {
      ++connector_overruns_;  // events were dropped by the kernel: counted
      continue;
    }
    if (n <= 0) break;
    if (from.nl_pid != 0) continue;  // only the kernel speaks for processes
    for (auto* nh = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(nh, static_cast<size_t>(n));
         nh = NLMSG_NEXT(nh, n)) {
      const auto* cn = static_cast<const cn_msg*>(NLMSG_DATA(nh));
      if (nh->nlmsg_len < NLMSG_LENGTH(sizeof(cn_msg)) || cn->id.idx != CN_IDX_PROC ||
          nh->nlmsg_len < NLMSG_LENGTH(sizeof(cn_msg) + cn->len)) {
        continue;
      }
      proc_event ev{};
      std::memcpy(&ev, cn->data, std::min<size_t>(cn->len, sizeof(ev)));
      OnEvent(ev, deaths, tgid_of);
    }
  }
}

std::vector<Death> DeathWatch::Poll() {
  DrainSenders();
  std::vector<Death> deaths;
  std::map<int32_t, int32_t> tgid_of;  // this batch's thread exits
  ReadConnector(&deaths, &tgid_of);
  uint64_t newest = 0;
  for (Death& d : deaths) {
    newest = std::max(newest, d.time_ns);
    for (const auto& [tid, tgid] : tgid_of) {
      if (tgid == d.pid) d.other_tids.push_back(tid);
    }
    // The newest signal of the death's kind aimed at the process or one of
    // its threads: the one that killed it.
    auto best = senders_.end();
    for (auto it = senders_.begin(); it != senders_.end(); ++it) {
      const auto& s = it->second;
      auto t = tgid_of.find(it->first);
      bool mine = it->first == d.pid || s.target_tgid == d.pid ||
                  (t != tgid_of.end() && t->second == d.pid);
      if (mine && s.signal == d.signal &&
          (best == senders_.end() || s.time_ns > best->second.time_ns))
        best = it;
    }
    if (best != senders_.end()) {
      d.sender = best->second;
      senders_.erase(best);
    }
  }
  // Signals whose target did not die of them (handled, or a pid that
  // exited otherwise) go with age.
  uint64_t now = newest;
  for (const auto& [tid, s] : senders_) now = std::max(now, s.time_ns);
  std::erase_if(senders_,
                [now](const auto& e) { return e.second.time_ns + kSenderMaxAgeNs < now; });
  return deaths;
}

nlohmann::json DeathWatch::Status() const {
  nlohmann::json j = {{"mechanism", "process-events connector + signal:signal_generate"},
                      {"exits_seen", exits_seen_},
                      {"connector_overruns", connector_overruns_},
                      {"senders_available", sender_unavailable_.empty()},
                      {"sender_records_lost", signal_records_lost_},
                      {"senders_dropped", senders_dropped_},
                      {"processes_known", infos_.size()},
                      {"processes_not_held", infos_dropped_}};
  if (!sender_unavailable_.empty()) j["senders_unavailable"] = sender_unavailable_;
  return j;
}

}  // namespace flightrec::recorder
