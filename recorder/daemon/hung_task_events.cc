#include "recorder/daemon/hung_task_events.h"

#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include <fmt/format.h>

#include "common/read_file.h"
#include "recorder/daemon/perf_ring.h"
#include "recorder/perf/perf_event.h"
#include "recorder/perf/sched_switch.h"

namespace flightrec::recorder {
namespace {

constexpr const char* kTimeoutFile = "/proc/sys/kernel/hung_task_timeout_secs";

Status CheckDetectorOn() {
  auto text = ReadFileToString(kTimeoutFile, 64);
  if (!text.ok()) {
    return Unsupported(
        fmt::format("hung-task trigger: this kernel has no hung-task detector ({}: needs "
                    "CONFIG_DETECT_HUNG_TASK)",
                    kTimeoutFile));
  }
  if (std::strtoull(text->c_str(), nullptr, 10) == 0) {
    return Unsupported(
        fmt::format("hung-task trigger: the kernel's hung-task detector is off ({} is 0; set "
                    "kernel.hung_task_timeout_secs)",
                    kTimeoutFile));
  }
  return OkStatus();
}

}  // namespace

StatusOr<std::unique_ptr<HungTaskEvents>> HungTaskEvents::Create() {
  RETURN_IF_ERROR(CheckDetectorOn());
  ASSIGN_OR_RETURN(std::string dir, perf::TracefsDir());
  const std::string path = dir + "/events/sched/sched_process_hang/format";
  auto text = ReadFileToString(path, 64u << 10);
  if (!text.ok()) return text.status().Annotate("hung-task trigger: reading " + path);
  ASSIGN_OR_RETURN(perf::TracepointField f, perf::ParseTracepointField(*text, "pid"));
  if (f.field.size != 4) return Corrupt("sched_process_hang format: pid is not 4 bytes");
  std::unique_ptr<HungTaskEvents> h(new HungTaskEvents());
  h->pid_offset_ = f.field.offset;
  const long page = sysconf(_SC_PAGESIZE);
  for (int cpu : perf::OnlineCpus()) {
    perf_event_attr attr{};
    attr.size = sizeof(attr);
    attr.type = PERF_TYPE_TRACEPOINT;
    attr.config = f.id;
    attr.sample_period = 1;
    attr.sample_type = PERF_SAMPLE_RAW;
    attr.wakeup_events = 1;
    ASSIGN_OR_RETURN(
        ScopedFd fd,
        perf::OpenPerfEvent(attr, -1, cpu, -1, fmt::format("sched_process_hang on cpu {}", cpu)));
    const size_t len = static_cast<size_t>(page) * 2;
    void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
    if (p == MAP_FAILED) return ErrnoStatus("sched_process_hang: mmap");
    h->cpus_.push_back({std::move(fd), ScopedMmap(p, len)});
  }
  return h;
}

std::vector<int> HungTaskEvents::fds() const {
  std::vector<int> out;
  for (const auto& c : cpus_) out.push_back(c.fd.get());
  return out;
}

bool HungTaskEvents::Pending() const {
  for (const auto& c : cpus_) {
    if (PerfRingPending(c.ring)) return true;
  }
  return false;
}

std::vector<uint32_t> HungTaskEvents::Drain() {
  std::vector<uint32_t> tids;
  for (auto& c : cpus_) {
    DrainPerfRing(c.ring, [&](const perf_event_header& hdr, const std::vector<uint8_t>& body) {
      // PERF_SAMPLE_RAW: u32 size, then the raw record.
      uint32_t size = 0;
      if (hdr.type != PERF_RECORD_SAMPLE || body.size() < 4) return;
      std::memcpy(&size, body.data(), 4);
      if (size > body.size() - 4 || pid_offset_ > size || size - pid_offset_ < 4) return;
      uint32_t tid = 0;
      std::memcpy(&tid, body.data() + 4 + pid_offset_, 4);
      ++reports_;
      if (tid != 0) tids.push_back(tid);
    });
  }
  return tids;
}

}  // namespace flightrec::recorder
