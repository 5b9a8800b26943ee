#include "recorder/daemon/uprobe_trigger.h"

#include "recorder/daemon/perf_ring.h"

#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

namespace flightrec::recorder {
namespace {

// One data page plus the control page: a hit is a 32-byte record and the
// daemon drains on every wakeup, so one page holds >100 undrained hits.
constexpr size_t kRingPages = 1;

StatusOr<int> UprobePmuType() {
  std::ifstream in("/sys/bus/event_source/devices/uprobe/type");
  int type = -1;
  if (!(in >> type)) {
    return Unsupported(
        "this kernel has no uprobe perf PMU (/sys/bus/event_source/devices/uprobe/type); "
        "uprobe triggers need CONFIG_UPROBE_EVENTS");
  }
  return type;
}

std::vector<uint32_t> OnlineCpus() {
  std::vector<uint32_t> cpus;
  long n = sysconf(_SC_NPROCESSORS_CONF);
  for (long c = 0; c < n; ++c) {
    std::ifstream f(fmt::format("/sys/devices/system/cpu/cpu{}/online", c));
    int online = 1;  // cpu0 often has no "online" file: it is always online
    if (f) f >> online;
    if (online) cpus.push_back(static_cast<uint32_t>(c));
  }
  return cpus;
}

}  // namespace

StatusOr<std::unique_ptr<UprobeTrigger>> UprobeTrigger::Create(const std::string& spec) {
  ASSIGN_OR_RETURN(UprobeTarget target, ResolveUprobeTarget(spec));
  return Create(std::move(target), spec);
}

StatusOr<std::unique_ptr<UprobeTrigger>> UprobeTrigger::Create(UprobeTarget target,
                                                               const std::string& spec) {
  ASSIGN_OR_RETURN(int type, UprobePmuType());
  std::unique_ptr<UprobeTrigger> t(new UprobeTrigger());
  // The kernel resolves uprobe_path itself (kern_path, following links):
  // through the magic link of the fd the offset was computed on, it cannot
  // reach another file swapped in under the path meanwhile.
  const std::string kernel_path =
      target.file ? fmt::format("/proc/self/fd/{}", target.file.get()) : target.path;
  t->target_ = std::move(target);
  long page = sysconf(_SC_PAGESIZE);
  for (uint32_t cpu : OnlineCpus()) {
    perf_event_attr attr{};
    attr.size = sizeof(attr);
    attr.type = static_cast<uint32_t>(type);
    attr.config = 0;  // bit 0 = retprobe (format/retprobe: config:0); we want entry
    attr.uprobe_path = reinterpret_cast<uint64_t>(kernel_path.c_str());
    attr.probe_offset = t->target_.file_offset;
    attr.sample_period = 1;
    attr.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
    attr.use_clockid = 1;
    attr.clockid = CLOCK_MONOTONIC;
    attr.wakeup_events = 1;
    int fd = static_cast<int>(
        syscall(SYS_perf_event_open, &attr, -1, static_cast<int>(cpu), -1, PERF_FLAG_FD_CLOEXEC));
    if (fd < 0) {
      int err = errno;
      if (err == EACCES || err == EPERM) {
        return ErrnoStatus(err, fmt::format("uprobe trigger {}: need root or CAP_PERFMON "
                                            "(system-wide uprobe on cpu {})",
                                            spec, cpu));
      }
      return ErrnoStatus(err,
                         fmt::format("uprobe trigger {}: perf_event_open on cpu {}", spec, cpu));
    }
    Cpu c;
    c.fd.reset(fd);
    c.cpu = cpu;
    size_t len = static_cast<size_t>(page) * (1 + kRingPages);
    void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return ErrnoStatus(fmt::format("uprobe trigger {}: mmap", spec));
    c.ring = ScopedMmap(p, len);
    t->cpus_.push_back(std::move(c));
  }
  t->target_.file.reset();  // the events hold the file now
  return t;
}

UprobeTrigger::~UprobeTrigger() = default;

std::vector<int> UprobeTrigger::fds() const {
  std::vector<int> out;
  for (const auto& c : cpus_) out.push_back(c.fd.get());
  return out;
}

bool UprobeTrigger::Pending() const {
  for (const auto& c : cpus_) {
    if (PerfRingPending(c.ring)) return true;
  }
  return false;
}

std::vector<UprobeHit> UprobeTrigger::Drain() {
  std::vector<UprobeHit> hits;
  for (auto& c : cpus_) {
    DrainPerfRing(c.ring, [&](const perf_event_header& hdr, const std::vector<uint8_t>& body) {
      if (hdr.type != PERF_RECORD_SAMPLE || body.size() < 16) return;
      UprobeHit h;
      std::memcpy(&h.pid, body.data(), 4);
      std::memcpy(&h.tid, body.data() + 4, 4);
      std::memcpy(&h.time_ns, body.data() + 8, 8);
      h.cpu = c.cpu;
      hits.push_back(h);
      ++hits_;
    });
  }
  return hits;
}

}  // namespace flightrec::recorder
