#include "recorder/perf/aux_trace.h"

#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include <fmt/format.h>

#include "common/read_file.h"
#include "common/units.h"
#include "recorder/perf/perf_event.h"

namespace flightrec::recorder::perf {
namespace {

constexpr uint64_t kMinAuxBytes = 64ull << 10;
constexpr size_t kDataPages = 8;  // DATA ring for PERF_RECORD_AUX records only

// Each knob's format term per PMU kind ("" = the PMU has no such knob).
struct Terms {
  const char* cyc;
  const char* mtc;
  const char* timing;
  const char* branch;
};
Terms TermsFor(const std::string& kind) {
  if (kind == "pt") return {"cyc", "mtc", "tsc", "branch"};
  if (kind == "spe") return {"", "", "ts_enable", "branch_filter"};
  return {"cycacc", "", "timestamp", ""};  // etm
}

Status SetOption(AuxTraceSpec* s, const std::string& opt) {
  if (opt == "cyc")
    s->cyc = true;
  else if (opt == "mtc")
    s->mtc = true;
  else if (opt == "branch-only")
    s->branch_only = true;
  else if (opt == "user")
    s->user = true, s->kernel = false;
  else if (opt == "kernel")
    s->kernel = true, s->user = false;
  else if (opt == "user+kernel")
    s->kernel = s->user = true;
  else if (opt.rfind("size=", 0) == 0) {
    ASSIGN_OR_RETURN(uint64_t n, ParseSize(opt.substr(5)));
    if (n < kMinAuxBytes || n > kMaxAuxAreaBytes || (n & (n - 1))) {
      return InvalidArgument(
          fmt::format("--aux-trace size={}: the AUX area is a power of two from 64K to 1G per CPU",
                      opt.substr(5)));
    }
    s->size_bytes = n;
  } else {
    return InvalidArgument(fmt::format(
        "--aux-trace: unknown option '{}' (size=N, cyc, mtc, branch-only, user, kernel, "
        "user+kernel)",
        opt));
  }
  return OkStatus();
}

}  // namespace

StatusOr<AuxTraceSpec> ParseAuxTraceSpec(const std::string& text) {
  AuxTraceSpec s;
  size_t start = 0;
  for (size_t i = 0;; ++i) {
    const size_t comma = text.find(',', start);
    const std::string part = text.substr(start, comma - start);
    if (i == 0) {
      if (part != "pt" && part != "spe" && part != "etm") {
        return InvalidArgument(fmt::format(
            "--aux-trace: '{}' is not a trace kind: pt (intel_pt), spe (arm_spe), etm (cs_etm)",
            part));
      }
      s.kind = part;
    } else {
      RETURN_IF_ERROR(SetOption(&s, part));
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (s.branch_only && (s.cyc || s.mtc)) {
    return InvalidArgument("--aux-trace: branch-only leaves out timing; cyc and mtc are timing");
  }
  return s;
}

std::vector<std::string> PmuNamesFor(const std::string& kind) {
  if (kind == "pt") return {"intel_pt"};
  if (kind == "spe") return {"arm_spe_0", "arm_spe"};
  return {"cs_etm"};
}

TracePmu ProbeTracePmu(const std::string& kind, const std::string& sysfs) {
  TracePmu p;
  for (const auto& name : PmuNamesFor(kind)) {
    const std::string dir = sysfs + "/" + name;
    auto type = ReadFileToString(dir + "/type", 64);
    if (!type.ok()) continue;
    char* end = nullptr;
    const unsigned long t = std::strtoul(type->c_str(), &end, 10);
    if (end == type->c_str() || t > UINT32_MAX) continue;
    p.present = true;
    p.name = name;
    p.type = static_cast<uint32_t>(t);
    for (const char* term : {"cyc", "mtc", "tsc", "branch", "noretcomp", "ts_enable",
                             "branch_filter", "cycacc", "timestamp"}) {
      auto f = ReadFileToString(dir + "/format/" + term, 256);
      if (f.ok()) p.format[term] = f->substr(0, f->find('\n'));
    }
    return p;
  }
  std::string names;
  for (const auto& n : PmuNamesFor(kind)) names += (names.empty() ? "" : " or ") + n;
  p.why = fmt::format(
      "this machine has no {} PMU ({} has no {}: the CPU lacks the trace unit, or a VM does not "
      "pass it through)",
      kind, sysfs, names);
  return p;
}

Status SetFormatTerm(const TracePmu& pmu, const std::string& term, uint64_t value,
                     perf_event_attr* attr) {
  auto it = pmu.format.find(term);
  if (it == pmu.format.end()) {
    return InvalidArgument(fmt::format("{} has no format term '{}'", pmu.name, term));
  }
  const std::string& f = it->second;  // "config:13" or "config1:14-17"
  const size_t colon = f.find(':');
  unsigned lo = 0, hi = 0;
  const std::string field = f.substr(0, colon);
  const int n =
      colon == std::string::npos ? 0 : std::sscanf(f.c_str() + colon + 1, "%u-%u", &lo, &hi);
  if (n < 1 || (n == 1 && (hi = lo, false)) || hi < lo || hi > 63) {
    return InvalidArgument(
        fmt::format("{}'s format term {} is '{}': not FIELD:BIT[-BIT]", pmu.name, term, f));
  }
  __u64* target = field == "config"    ? &attr->config
                  : field == "config1" ? &attr->config1
                  : field == "config2" ? &attr->config2
                                       : nullptr;
  if (target == nullptr) {
    return InvalidArgument(
        fmt::format("{}'s format term {} names field '{}'", pmu.name, term, field));
  }
  const unsigned width = hi - lo + 1;
  const uint64_t mask = (width == 64 ? ~0ull : ((1ull << width) - 1)) << lo;
  *target = (*target & ~mask) | ((value << lo) & mask);
  return OkStatus();
}

StatusOr<perf_event_attr> BuildAuxTraceAttr(const TracePmu& pmu, const AuxTraceSpec& spec) {
  perf_event_attr a{};
  a.size = sizeof(a);
  a.type = pmu.type;
  a.disabled = 1;  // enabled once the AUX area is mapped
  a.exclude_kernel = !spec.kernel;
  a.exclude_user = !spec.user;
  a.exclude_hv = 1;
  a.sample_id_all = 1;
  const Terms t = TermsFor(spec.kind);
  if (*t.branch && pmu.format.count(t.branch)) RETURN_IF_ERROR(SetFormatTerm(pmu, t.branch, 1, &a));
  if (*t.timing && !spec.branch_only) RETURN_IF_ERROR(SetFormatTerm(pmu, t.timing, 1, &a));
  if (spec.cyc) {
    if (!*t.cyc) return InvalidArgument(fmt::format("--aux-trace {}: no cyc knob", spec.kind));
    RETURN_IF_ERROR(SetFormatTerm(pmu, t.cyc, 1, &a));
  }
  if (spec.mtc) {
    if (!*t.mtc) return InvalidArgument(fmt::format("--aux-trace {}: no mtc knob", spec.kind));
    RETURN_IF_ERROR(SetFormatTerm(pmu, t.mtc, 1, &a));
  }
  return a;
}

void SetAuxAction(perf_event_attr* attr, uint32_t bits) {
  // The u32 after aux_sample_size, ending at PERF_ATTR_SIZE_VER6 (120);
  // named __reserved_3 in headers before 6.13.
  constexpr size_t kAt = offsetof(perf_event_attr, aux_sample_size) + 4;
  static_assert(kAt == 116 && kAt + 4 == PERF_ATTR_SIZE_VER6);
  uint32_t v;
  std::memcpy(&v, reinterpret_cast<char*>(attr) + kAt, 4);
  v |= bits;
  std::memcpy(reinterpret_cast<char*>(attr) + kAt, &v, 4);
}

perf_event_attr BuildCrashPauseAttr(uint32_t kprobe_type, const std::string& func) {
  perf_event_attr a{};
  a.size = sizeof(a);
  a.type = kprobe_type;
  a.config1 = reinterpret_cast<uintptr_t>(func.c_str());  // kprobe_func
  a.config2 = 0;                                          // kprobe_addr: offset 0
  a.sample_period = 1;  // every hit "overflows", and an overflow pauses
  a.exclude_user = 1;   // a kprobe fires in the kernel
  SetAuxAction(&a, kAuxPause);
  return a;
}

bool AreaWrapped(const uint8_t* area, uint64_t size) {
  const uint64_t from = size > 4096 ? size - 4096 : 0;
  for (uint64_t i = from; i < size; ++i) {
    if (area[i] != 0) return true;
  }
  return false;
}

std::string SnapshotBytes(const uint8_t* area, uint64_t size, uint64_t head, bool wrapped) {
  const uint64_t at = head % size;
  const char* p = reinterpret_cast<const char*>(area);
  if (!wrapped && head < size) return std::string(p, at);
  // Oldest first: from the head to the end, then from the start to the head.
  std::string out(p + at, size - at);
  out.append(p, at);
  return out;
}

namespace {

// Maps the control page and DATA ring, then the AUX area read-only (overwrite
// mode: rb_alloc_aux in kernel/events/ring_buffer.c), as perf's
// auxtrace_mmap__mmap does (tools/perf/util/auxtrace.c).
Status MapCpu(AuxCpu* c, uint64_t aux_bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t base_len = page * (1 + kDataPages);
  void* base = mmap(nullptr, base_len, PROT_READ | PROT_WRITE, MAP_SHARED, c->fd.get(), 0);
  if (base == MAP_FAILED) return ErrnoStatus(fmt::format("mmap of cpu {}'s trace ring", c->cpu));
  c->base = ScopedMmap(base, base_len);
  auto* meta = static_cast<perf_event_mmap_page*>(base);
  meta->aux_offset = base_len;
  meta->aux_size = aux_bytes;
  void* aux =
      mmap(nullptr, aux_bytes, PROT_READ, MAP_SHARED, c->fd.get(), static_cast<off_t>(base_len));
  if (aux == MAP_FAILED) {
    return ErrnoStatus(fmt::format(
        "mmap of cpu {}'s {} AUX area (perf_event_mlock_kb bounds what a process may lock)", c->cpu,
        FormatBytes(aux_bytes)));
  }
  c->aux = ScopedMmap(aux, aux_bytes);
  return OkStatus();
}

}  // namespace

StatusOr<std::unique_ptr<AuxTraceCapture>> AuxTraceCapture::Open(const AuxTraceSpec& spec) {
  std::unique_ptr<AuxTraceCapture> c(new AuxTraceCapture());
  c->spec_ = spec;
  c->pmu_ = ProbeTracePmu(spec.kind);
  if (!c->pmu_.present) return Unavailable(c->pmu_.why);
  ASSIGN_OR_RETURN(c->attr_, BuildAuxTraceAttr(c->pmu_, spec));
  for (int cpu : OnlineCpus()) {
    AuxCpu ac;
    ac.cpu = cpu;
    perf_event_attr attr = c->attr_;
    ASSIGN_OR_RETURN(ac.fd, OpenPerfEvent(attr, -1, cpu, -1,
                                          fmt::format("{} trace on cpu {}", c->pmu_.name, cpu)));
    RETURN_IF_ERROR(MapCpu(&ac, spec.size_bytes));
    if (ioctl(ac.fd.get(), PERF_EVENT_IOC_ENABLE, 0) != 0) {
      return ErrnoStatus(fmt::format("enabling {} on cpu {}", c->pmu_.name, cpu));
    }
    c->cpus_.push_back(std::move(ac));
  }
  return c;
}

// PERF_RECORD_AUX records (include/uapi/linux/perf_event.h: aux_offset,
// aux_size, flags) the kernel wrote to the DATA ring since the last call:
// their flags OR-ed (perf_event_aux_event, from perf_aux_output_end).
uint64_t AuxTraceCapture::DrainAuxFlags(AuxCpu& c) {
  auto* meta = static_cast<perf_event_mmap_page*>(c.base.data());
  const char* data = static_cast<const char*>(c.base.data()) + meta->data_offset;
  const uint64_t size = meta->data_size;
  const uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
  uint64_t flags = 0;
  auto read = [&](uint64_t pos, void* out, size_t n) {
    for (size_t i = 0; i < n; ++i) static_cast<char*>(out)[i] = data[(pos + i) % size];
  };
  while (c.data_tail + sizeof(perf_event_header) <= head) {
    perf_event_header h;
    read(c.data_tail, &h, sizeof h);
    if (h.size < sizeof h || c.data_tail + h.size > head) break;
    if (h.type == PERF_RECORD_AUX && h.size >= sizeof h + 24) {
      uint64_t f = 0;
      read(c.data_tail + sizeof h + 16, &f, 8);
      flags |= f;
    }
    c.data_tail += h.size;
  }
  __atomic_store_n(&meta->data_tail, c.data_tail, __ATOMIC_RELEASE);
  return flags;
}

AuxTrace AuxTraceCapture::Snapshot() {
  AuxTrace t;
  t.pmu = pmu_.name;
  t.pmu_type = attr_.type;
  t.config = attr_.config;
  t.config1 = attr_.config1;
  t.config2 = attr_.config2;
  const uint64_t now = static_cast<uint64_t>(MonotonicNs());
  for (auto& c : cpus_) {
    // Stopping the event ends the driver's output handle, which publishes
    // aux_head (perf_aux_output_end); until then it is stale.
    ioctl(c.fd.get(), PERF_EVENT_IOC_DISABLE, 0);
    auto* meta = static_cast<perf_event_mmap_page*>(c.base.data());
    if (meta->cap_user_time_zero) {
      t.time_mult = meta->time_mult;
      t.time_shift = meta->time_shift;
      t.time_zero = meta->time_zero;
    }
    AuxCpuTrace ct;
    ct.cpu = static_cast<uint32_t>(c.cpu);
    ct.aux_head = __atomic_load_n(&meta->aux_head, __ATOMIC_ACQUIRE);
    ct.aux_size = c.aux.size();
    const auto* area = static_cast<const uint8_t*>(c.aux.data());
    const bool wrapped = ct.aux_head >= ct.aux_size || AreaWrapped(area, ct.aux_size);
    ct.data = SnapshotBytes(area, ct.aux_size, ct.aux_head, wrapped);
    // The section keeps aux_head as a running count (data ends there).
    if (ct.aux_head < ct.data.size()) ct.aux_head += ct.aux_size;
    ct.flags = DrainAuxFlags(c);
    ct.cut_time_ns = now;
    ioctl(c.fd.get(), PERF_EVENT_IOC_ENABLE, 0);
    t.cpus.push_back(std::move(ct));
  }
  ++snapshots_;
  return t;
}

nlohmann::json AuxTraceCapture::Describe() const {
  return {{"enabled", true},
          {"requested", true},
          {"pmu", pmu_.name},
          {"pmu_present", true},
          {"cpus", cpus_.size()},
          {"area_bytes_per_cpu", spec_.size_bytes},
          {"config", fmt::format("{:#x}", attr_.config)},
          {"user", spec_.user},
          {"kernel", spec_.kernel},
          {"snapshots", snapshots_},
          {"crash_cut", "disabled when the dump starts (6.13 aux_pause not used yet)"}};
}

void AssignTracedTasks(const std::vector<Sample>& samples, uint32_t crash_pid, AuxTrace* t) {
  std::map<uint32_t, std::pair<uint32_t, uint32_t>> last, crashed;
  for (const auto& s : samples) {
    last[s.cpu] = {s.pid, s.tid};
    if (crash_pid != 0 && s.pid == crash_pid) crashed = {{s.cpu, {s.pid, s.tid}}};
  }
  for (auto& c : t->cpus) {
    if (auto it = crashed.find(c.cpu); it != crashed.end()) {
      std::tie(c.pid, c.tid) = it->second;
    } else if (auto l = last.find(c.cpu); l != last.end()) {
      std::tie(c.pid, c.tid) = l->second;
    }
  }
}

nlohmann::json AuxTraceOffJson(const TracePmu& pmu, bool requested, const std::string& why) {
  return {{"enabled", false},
          {"requested", requested},
          {"pmu", pmu.present ? pmu.name : ""},
          {"pmu_present", pmu.present},
          {"why_off", why}};
}

}  // namespace flightrec::recorder::perf
