#include "recorder/module/module_backend.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "common/units.h"

namespace flightrec::recorder::module {
namespace {

// Registers present in an AUX blob (abi 1): all FLIGHTREC_NR_REGS, in the
// bit order of arch/x86/include/uapi/asm/perf_regs.h, as perf's regs_mask.
constexpr uint64_t kAuxRegsMask = (1ull << FLIGHTREC_NR_REGS) - 1;

std::string PathOf(const flightrec_sideband& r) {
  return std::string(r.path, strnlen(r.path, sizeof(r.path)));
}

Status Ioctl(int fd, unsigned long cmd, void* arg, const char* what) {
  if (ioctl(fd, cmd, arg) != 0) return ErrnoStatus(fmt::format("/dev/flightrec: {}", what));
  return OkStatus();
}

}  // namespace

std::optional<Event> SidebandEvent(const flightrec_sideband& r) {
  switch (r.type) {
    case FLIGHTREC_SB_MMAP: {
      MmapEvent m;
      m.time_ns = r.time_ns;
      m.pid = r.pid;
      m.tid = r.tid;
      m.start = r.start;
      m.len = r.len;
      m.pgoff = r.pgoff;
      // new_encode_dev() (include/linux/kdev_t.h), as the module stores it.
      m.maj = (r.dev & 0xfff00) >> 8;
      m.min = (r.dev & 0xff) | ((r.dev >> 12) & 0xfff00);
      m.ino = r.ino;
      m.prot = PROT_READ | PROT_EXEC;  // the module reports executable mappings only
      m.filename = PathOf(r);
      return m;
    }
    case FLIGHTREC_SB_EXEC: {
      CommEvent c;
      c.time_ns = r.time_ns;
      c.pid = r.pid;
      c.tid = r.tid;
      std::string path = PathOf(r);
      c.comm = path.substr(path.rfind('/') + 1).substr(0, 15);
      c.exec = true;
      return c;
    }
    case FLIGHTREC_SB_FORK:
    case FLIGHTREC_SB_EXIT: {
      TaskEvent t;
      t.time_ns = r.time_ns;
      t.pid = r.pid;
      t.tid = r.tid;
      t.ppid = r.ppid;
      t.ptid = r.ppid;
      t.exit = r.type == FLIGHTREC_SB_EXIT;
      return t;
    }
    default:
      return std::nullopt;  // a newer module's record type: skipped
  }
}

Sample SampleFromRecord(const flightrec_sample& r, uint64_t period_ns, const flightrec_aux* aux,
                        const uint8_t* stack, size_t stack_len) {
  Sample s;
  s.time_ns = r.time_ns;
  s.cpu = r.cpu;
  s.pid = r.pid;
  s.tid = r.tid;
  s.ip = r.ip;
  s.period = period_ns;
  s.mode = r.mode == FLIGHTREC_MODE_KERNEL ? CpuMode::kKernel : CpuMode::kUser;
  const size_t nk = std::min<size_t>(r.nr_kframes, FLIGHTREC_MAX_KFRAMES);
  const size_t nu = std::min<size_t>(r.nr_uframes, FLIGHTREC_MAX_UFRAMES);
  // Like a perf callchain: the chain of the sampled mode starts with the ip.
  // kframes are return addresses only; uframes start with the user ip.
  if (s.mode == CpuMode::kKernel) {
    s.kernel_chain.push_back(r.ip);
    s.kernel_chain.insert(s.kernel_chain.end(), r.kframes, r.kframes + nk);
  }
  s.user_chain.assign(r.uframes, r.uframes + nu);
  if (aux != nullptr && aux->abi == 1) {
    s.user_stack.regs_mask = kAuxRegsMask;
    s.user_stack.regs.assign(aux->regs, aux->regs + FLIGHTREC_NR_REGS);
    s.user_stack.stack.assign(stack, stack + stack_len);
    s.user_stack.dyn_size = stack_len;
  }
  return s;
}

StatusOr<std::unique_ptr<ModuleBackend>> ModuleBackend::Create(const std::string& device) {
  auto b = std::unique_ptr<ModuleBackend>(new ModuleBackend);
  b->fd_ = ScopedFd(open(device.c_str(), O_RDWR | O_CLOEXEC));
  if (!b->fd_) {
    return ErrnoStatus(
        fmt::format("opening {} (is flightrec.ko loaded? root or CAP_PERFMON?)", device));
  }
  RETURN_IF_ERROR(Ioctl(b->fd_.get(), FLIGHTREC_IOC_INFO, &b->info_, "INFO"));
  if (b->info_.version != FLIGHTREC_VERSION || b->info_.sample_size != sizeof(flightrec_sample) ||
      b->info_.sideband_size != sizeof(flightrec_sideband)) {
    return Unsupported(fmt::format(
        "{}: module ABI version {} (sample {} B, sideband {} B) is not the one this recorderd "
        "was built for (version {}, {} B, {} B)",
        device, b->info_.version, b->info_.sample_size, b->info_.sideband_size, FLIGHTREC_VERSION,
        sizeof(flightrec_sample), sizeof(flightrec_sideband)));
  }
  return b;
}

uint64_t ModuleBackend::SamplePeriodNs() const {
  if (info_.period) return info_.period;
  return info_.freq ? 1'000'000'000ull / info_.freq : 0;
}

nlohmann::json ModuleBackend::Describe() const {
  uint64_t hz = info_.freq ? info_.freq : (info_.period ? 1'000'000'000ull / info_.period : 0);
  return {{"backend", "module"},
          {"event", info_.event == FLIGHTREC_EVENT_CYCLES ? "cycles" : "cpu-clock"},
          {"frequency_hz", hz},
          {"period", info_.period},
          {"cpus", info_.nr_cpus},
          {"data_ring_bytes", info_.data_ring_bytes},
          {"aux_ring_bytes", info_.aux_ring_bytes},
          {"stack_bytes", info_.stack_bytes},
          {"call_graph", "fp"},
          {"kernel_samples", true}};
}

Status ModuleBackend::DrainSideband(const std::function<void(const Event&)>& sink) {
  std::vector<flightrec_sideband> buf(256);
  std::vector<flightrec_sideband> batch;
  for (;;) {
    flightrec_read rd{};
    rd.ring = FLIGHTREC_RING_SIDEBAND;
    rd.buf = reinterpret_cast<uint64_t>(buf.data());
    rd.buf_len = buf.size() * sizeof(flightrec_sideband);
    RETURN_IF_ERROR(Ioctl(fd_.get(), FLIGHTREC_IOC_READ_RING, &rd, "READ_RING sideband"));
    size_t n = rd.bytes / sizeof(flightrec_sideband);
    const auto* recs = reinterpret_cast<const flightrec_sideband*>(
        reinterpret_cast<const char*>(buf.data()) + rd.data_offset);
    batch.insert(batch.end(), recs, recs + n);
    if (n < buf.size()) break;
  }
  for (const auto& e : OrderSideband(std::move(batch))) sink(e);
  return OkStatus();
}

std::vector<Event> OrderSideband(std::vector<flightrec_sideband> batch) {
  // The module reports an exec when it completes (sched_process_exec), after
  // the new image's mappings were made (load_elf_binary maps them first).
  // The process table clears an address space on exec, so the exec must
  // come before those mappings: it is moved before the first mapping of the
  // pid since the pid's previous fork/exec record. If none of them is in
  // this batch (they were drained earlier), the exec only renames the
  // process: clearing now would drop the new image's mappings.
  std::vector<Event> out;
  std::vector<std::optional<Event>> events;
  for (const auto& r : batch) events.push_back(SidebandEvent(r));
  for (size_t i = 0; i < batch.size(); ++i) {
    if (batch[i].type != FLIGHTREC_SB_EXEC || !events[i]) continue;
    size_t first_map = i;
    for (size_t j = i; j-- > 0;) {
      if (batch[j].pid != batch[i].pid) continue;
      if (batch[j].type == FLIGHTREC_SB_FORK || batch[j].type == FLIGHTREC_SB_EXEC) break;
      if (batch[j].type == FLIGHTREC_SB_MMAP) first_map = j;
    }
    if (first_map == i) {
      std::get<CommEvent>(*events[i]).exec = false;
      continue;
    }
    auto exec = std::move(events[i]);
    events.erase(events.begin() + static_cast<std::ptrdiff_t>(i));
    events.insert(events.begin() + static_cast<std::ptrdiff_t>(first_map), std::move(exec));
    auto rec = batch[i];
    batch.erase(batch.begin() + static_cast<std::ptrdiff_t>(i));
    batch.insert(batch.begin() + static_cast<std::ptrdiff_t>(first_map), rec);
  }
  for (auto& e : events) {
    if (e) out.push_back(std::move(*e));
  }
  return out;
}

StatusOr<std::vector<flightrec_cpu_stats>> ModuleBackend::ReadStats(flightrec_stats* global) {
  std::vector<flightrec_cpu_stats> cpus(info_.nr_cpus);
  *global = {};
  global->buf = reinterpret_cast<uint64_t>(cpus.data());
  global->count = static_cast<uint32_t>(cpus.size());
  RETURN_IF_ERROR(Ioctl(fd_.get(), FLIGHTREC_IOC_STATS, global, "STATS"));
  cpus.resize(std::min<size_t>(cpus.size(), global->count));
  return cpus;
}

StatusOr<Snapshot> ModuleBackend::TakeSnapshot(int64_t last_ns) {
  Snapshot snap;
  int64_t t0 = MonotonicNs();
  RETURN_IF_ERROR(Ioctl(fd_.get(), FLIGHTREC_IOC_FREEZE, nullptr, "FREEZE"));
  snap.freeze_time_ns = static_cast<uint64_t>(MonotonicNs());
  snap.window_start_ns = last_ns > 0 && static_cast<uint64_t>(last_ns) < snap.freeze_time_ns
                             ? snap.freeze_time_ns - static_cast<uint64_t>(last_ns)
                             : 0;
  struct Thaw {
    int fd;
    ~Thaw() { ioctl(fd, FLIGHTREC_IOC_THAW, nullptr); }
  } thaw{fd_.get()};
  flightrec_stats global{};
  ASSIGN_OR_RETURN(auto cpus, ReadStats(&global));
  const uint64_t period = SamplePeriodNs();
  const uint64_t capacity = info_.data_ring_bytes / sizeof(flightrec_sample);
  uint64_t produced = 0, overwritten = 0, frozen = 0, size = 0, torn = 0, outside = 0, kept = 0;
  std::vector<flightrec_sample> data(std::max<uint64_t>(capacity, 1) + 1);
  std::vector<uint8_t> aux(info_.aux_ring_bytes + 4096);
  for (const auto& c : cpus) {
    if (!c.online && c.data_head == 0) continue;
    // DATA: everything still in the ring.
    flightrec_read rd{};
    rd.cpu = c.cpu;
    rd.ring = FLIGHTREC_RING_DATA;
    rd.from = c.data_head > capacity ? c.data_head - capacity : 0;
    rd.to = c.data_head;
    rd.buf = reinterpret_cast<uint64_t>(data.data());
    rd.buf_len = data.size() * sizeof(flightrec_sample);
    if (ioctl(fd_.get(), FLIGHTREC_IOC_READ_RING, &rd) != 0) {
      if (errno == ENODEV) continue;  // possible, never online
      return ErrnoStatus(fmt::format("/dev/flightrec: READ_RING data cpu {}", c.cpu));
    }
    size_t n = rd.bytes / sizeof(flightrec_sample);
    const auto* recs = reinterpret_cast<const flightrec_sample*>(
        reinterpret_cast<const char*>(data.data()) + rd.data_offset);
    // AUX: the whole ring once, sliced per sample below.
    flightrec_read ra{};
    ra.cpu = c.cpu;
    ra.ring = FLIGHTREC_RING_AUX;
    ra.from = c.aux_head > info_.aux_ring_bytes ? c.aux_head - info_.aux_ring_bytes : 0;
    ra.to = c.aux_head;
    ra.buf = reinterpret_cast<uint64_t>(aux.data());
    ra.buf_len = aux.size();
    bool have_aux = info_.aux_ring_bytes > 0 && c.aux_head > 0 &&
                    ioctl(fd_.get(), FLIGHTREC_IOC_READ_RING, &ra) == 0;
    uint64_t cpu_outside = 0, cpu_kept = 0;
    for (size_t i = 0; i < n; ++i) {
      const flightrec_sample& r = recs[i];
      if (r.time_ns < snap.window_start_ns) {
        ++cpu_outside;
        continue;
      }
      const flightrec_aux* ah = nullptr;
      const uint8_t* stack = nullptr;
      size_t stack_len = 0;
      if (have_aux && (r.flags & FLIGHTREC_SAMPLE_HAS_AUX) && r.aux_len >= sizeof(flightrec_aux) &&
          r.aux_pos >= ra.first && r.aux_pos + r.aux_len <= ra.next) {
        const uint8_t* p = aux.data() + ra.data_offset + (r.aux_pos - ra.first);
        ah = reinterpret_cast<const flightrec_aux*>(p);
        if (ah->seq == r.seq && ah->len <= r.aux_len &&
            sizeof(flightrec_aux) + ah->stack_len <= ah->len) {
          stack = p + sizeof(flightrec_aux);
          stack_len = ah->stack_len;
        } else {
          ah = nullptr;  // overwritten since: no stack for this one
        }
      }
      snap.samples.push_back(SampleFromRecord(r, period, ah, stack, stack_len));
      ++cpu_kept;
      if (snap.oldest_sample_ns == 0 || r.time_ns < snap.oldest_sample_ns) {
        snap.oldest_sample_ns = r.time_ns;
      }
    }
    produced += c.produced;
    overwritten += c.overwritten;
    frozen += c.dropped_frozen;
    size += c.dropped_size;
    torn += c.torn_on_read + rd.lost;
    outside += cpu_outside;
    kept += cpu_kept;
    snap.per_cpu.push_back({{"cpu", c.cpu},
                            {"online", c.online != 0},
                            {"produced", c.produced},
                            {"written", c.written},
                            {"in_ring", n},
                            {"in_window", cpu_kept},
                            {"outside_window", cpu_outside},
                            {"overwritten", c.overwritten},
                            {"paused", c.dropped_frozen},
                            {"size", c.dropped_size},
                            {"torn", c.torn_on_read},
                            {"lost_on_read", rd.lost},
                            {"aux_written", c.aux_written},
                            {"aux_overwritten", c.aux_overwritten}});
  }
  std::sort(snap.samples.begin(), snap.samples.end(),
            [](const Sample& a, const Sample& b) { return a.time_ns < b.time_ns; });
  snap.counters = {{"produced", produced},
                   {"in_window", kept},
                   {"outside_window", outside},
                   {"overwritten", overwritten},
                   {"paused", frozen},
                   {"size", size},
                   {"torn", torn},
                   {"in_ring", kept + outside}};
  // The module's counters are exact: produced == written + frozen + size,
  // and written == in ring + overwritten (+ torn on read).
  snap.unaccounted = static_cast<int64_t>(produced) -
                     static_cast<int64_t>(kept + outside + overwritten + frozen + size + torn);
  snap.copy_ns = MonotonicNs() - t0;
  return snap;
}

nlohmann::json ModuleBackend::Stats() {
  flightrec_stats global{};
  auto cpus = ReadStats(&global);
  nlohmann::json j = Describe();
  if (!cpus.ok()) {
    j["error"] = cpus.status().message();
    return j;
  }
  uint64_t produced = 0, written = 0, oldest = 0;
  for (const auto& c : *cpus) {
    produced += c.produced;
    written += c.written;
  }
  (void)oldest;
  j["produced"] = produced;
  j["written"] = written;
  j["sideband_written"] = global.sideband_written;
  j["sideband_dropped"] = global.sideband_dropped;
  j["markers_taken"] = global.markers_taken;
  j["markers_dropped"] = global.markers_dropped;
  uint64_t period = SamplePeriodNs();
  uint64_t capacity = info_.data_ring_bytes / sizeof(flightrec_sample);
  if (period) j["history_s"] = static_cast<double>(capacity) * period / 1e9;
  return j;
}

}  // namespace flightrec::recorder::module
