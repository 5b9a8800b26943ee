#include "recorder/module/module_backend.h"

#include <fcntl.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <time.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "common/units.h"

namespace flightrec::recorder::module {
namespace {

// Registers present in an AUX blob: all FLIGHTREC_NR_REGS, in the bit order
// of arch/x86/include/uapi/asm/perf_regs.h, as perf's regs_mask.
constexpr uint64_t kAuxRegsMask = (1ull << FLIGHTREC_NR_REGS) - 1;

std::string PathOf(const flightrec_sideband& r) {
  return std::string(r.path, strnlen(r.path, sizeof(r.path)));
}

// A load parameter of flightrec.ko from sysfs ("" if unreadable), at most
// 255 bytes, one line.
std::string ReadModuleParam(const char* name) {
  ScopedFd f(
      open(fmt::format("/sys/module/flightrec/parameters/{}", name).c_str(), O_RDONLY | O_CLOEXEC));
  if (!f) return "";
  char buf[256];
  ssize_t n = read(f.get(), buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  std::string v(buf, static_cast<size_t>(n));
  return v.substr(0, v.find('\n'));
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
    case FLIGHTREC_SB_LOST: {
      // The ring was full: r.len records (mmap/exec/fork/exit) from r.start
      // on are missing, so mappings made then are unknown. Kept in the
      // sideband history like perf's PERF_RECORD_LOST, so a record covering
      // that time says so.
      LostEvent l;
      l.time_ns = r.time_ns;
      l.cause = LossCause::kSidebandLost;
      l.count = r.len;
      return l;
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

std::string CallGraphMode::ToString() const {
  if (dwarf_stack_bytes > 0) return fmt::format("dwarf,{}", dwarf_stack_bytes);
  return callchain ? "fp" : "none";
}

StatusOr<CallGraphMode> ResolveCallGraph(const ModuleConfig& config, uint32_t module_stack_bytes) {
  CallGraphMode m;
  m.callchain = config.callchain;
  if (!config.dwarf) return m;
  // The module copies whole 8-byte words (round_down(stack_bytes, 8)).
  const uint32_t have = module_stack_bytes & ~7u;
  if (have == 0) {
    return InvalidArgument(
        "--call-graph dwarf: flightrec.ko copies no user stack (its stack_bytes parameter is 0); "
        "reload it with e.g. stack_bytes=8192, or use --call-graph fp");
  }
  if (config.dwarf_stack_bytes > have) {
    return InvalidArgument(fmt::format(
        "--call-graph dwarf,{}: flightrec.ko copies only {} bytes of user stack per sample (its "
        "stack_bytes parameter); reload it with stack_bytes={} or ask for at most dwarf,{}",
        config.dwarf_stack_bytes, have, config.dwarf_stack_bytes, have));
  }
  m.dwarf_stack_bytes = config.dwarf_stack_bytes ? config.dwarf_stack_bytes : have;
  return m;
}

std::vector<SampleRecord> ParseDataRecords(const uint8_t* p, size_t len, uint64_t first,
                                           uint64_t* malformed) {
  std::vector<SampleRecord> out;
  size_t off = 0;
  *malformed = 0;
  while (off < len) {
    flightrec_sample h{};
    const uint64_t pos = first + off;
    const size_t left = len - off;
    if (left < 8) break;
    std::memcpy(&h, p + off, std::min(left, sizeof(h)));
    // A record is a multiple of 8, inside the copy and inside its chunk.
    if (h.size < 8 || h.size % 8 != 0 || h.size > left ||
        pos / FLIGHTREC_DATA_CHUNK != (pos + h.size - 1) / FLIGHTREC_DATA_CHUNK) {
      break;
    }
    if (h.type == FLIGHTREC_REC_PAD) {
      off += h.size;
      continue;
    }
    if (h.type != FLIGHTREC_REC_SAMPLE || h.seq != pos || h.nr_kframes > FLIGHTREC_MAX_KFRAMES ||
        h.nr_uframes > FLIGHTREC_MAX_UFRAMES ||
        h.size != sizeof(h) + 8 * (size_t{h.nr_kframes} + h.nr_uframes)) {
      break;
    }
    SampleRecord& r = out.emplace_back();
    r.h = h;
    std::memcpy(r.kframes, p + off + sizeof(h), 8 * size_t{h.nr_kframes});
    std::memcpy(r.uframes, p + off + sizeof(h) + 8 * size_t{h.nr_kframes},
                8 * size_t{h.nr_uframes});
    off += h.size;
  }
  *malformed = len - off;
  return out;
}

Sample SampleFromRecord(const SampleRecord& rec, uint64_t period_ns, const flightrec_aux* aux,
                        const uint8_t* stack, size_t stack_len, const CallGraphMode& mode) {
  const flightrec_sample& r = rec.h;
  Sample s;
  s.time_ns = r.time_ns;
  s.cpu = r.cpu;
  s.pid = r.pid;
  s.tid = r.tid;
  s.ip = r.ip;
  s.period = period_ns;
  s.mode = r.mode == FLIGHTREC_MODE_KERNEL ? CpuMode::kKernel : CpuMode::kUser;
  // --call-graph none: the sampled ip only, like a perf sample without
  // PERF_SAMPLE_CALLCHAIN.
  const size_t nk = mode.callchain ? std::min<size_t>(r.nr_kframes, FLIGHTREC_MAX_KFRAMES) : 0;
  const size_t nu = mode.callchain ? std::min<size_t>(r.nr_uframes, FLIGHTREC_MAX_UFRAMES) : 0;
  // Like a perf callchain: the chain of the sampled mode starts with the ip.
  // kframes are return addresses only; uframes start with the user ip.
  if (s.mode == CpuMode::kKernel && mode.callchain) {
    s.kernel_chain.push_back(r.ip);
    s.kernel_chain.insert(s.kernel_chain.end(), rec.kframes, rec.kframes + nk);
  }
  s.user_chain.assign(rec.uframes, rec.uframes + nu);
  // The AUX blob only with --call-graph dwarf (fp records stay small and
  // replay uses the frame-pointer chain, as with the perf backend); the copy
  // starts at the stack pointer, so the first N bytes are the innermost.
  // Only an x86_64 (ABI_64) blob goes to the unwinder, which walks 8-byte
  // words with x86_64 CFI; a compat task's (ABI_32) keeps the frame-pointer
  // chain the module walked in 4-byte words, as perf's unwinder refuses a
  // regs_user abi it was not built for.
  if (aux != nullptr && aux->abi == PERF_SAMPLE_REGS_ABI_64 && r.abi == PERF_SAMPLE_REGS_ABI_64 &&
      mode.dwarf_stack_bytes > 0) {
    stack_len = std::min<size_t>(stack_len, mode.dwarf_stack_bytes);
    s.user_stack.regs_mask = kAuxRegsMask;
    s.user_stack.regs.assign(aux->regs, aux->regs + FLIGHTREC_NR_REGS);
    s.user_stack.stack.assign(stack, stack + stack_len);
    s.user_stack.dyn_size = stack_len;
  }
  return s;
}

uint64_t AppendSamples(const CpuCopy& cpu, uint64_t window_start_ns, uint64_t period_ns,
                       const CallGraphMode& mode, std::vector<Sample>* out) {
  uint64_t outside = 0;
  for (size_t i = 0; i < cpu.count; ++i) {
    const flightrec_sample& r = cpu.records[i].h;
    if (r.time_ns < window_start_ns) {
      ++outside;
      continue;
    }
    const flightrec_aux* ah = nullptr;
    const uint8_t* stack = nullptr;
    size_t stack_len = 0;
    if (cpu.aux != nullptr && (r.flags & FLIGHTREC_SAMPLE_HAS_AUX) &&
        r.aux_len >= sizeof(flightrec_aux) && r.aux_pos >= cpu.aux_first &&
        r.aux_pos + r.aux_len <= cpu.aux_end) {
      const uint8_t* p = cpu.aux + (r.aux_pos - cpu.aux_first);
      ah = reinterpret_cast<const flightrec_aux*>(p);
      if (ah->seq == r.seq && ah->len <= r.aux_len &&
          sizeof(flightrec_aux) + ah->stack_len <= ah->len) {
        stack = p + sizeof(flightrec_aux);
        stack_len = ah->stack_len;
      } else {
        ah = nullptr;  // overwritten since: no stack for this one
      }
    }
    out->push_back(SampleFromRecord(cpu.records[i], period_ns, ah, stack, stack_len, mode));
  }
  return outside;
}

const flightrec_marker* FindMarker(const std::vector<flightrec_marker>& markers, uint32_t pid,
                                   uint64_t now_ns, int64_t ttl_ns) {
  const flightrec_marker* best = nullptr;
  for (const auto& m : markers) {
    if (m.pid != pid) continue;
    // An old marker of a reused pid is not this crash's.
    if (m.time_ns + static_cast<uint64_t>(ttl_ns) < now_ns) continue;
    if (best == nullptr || m.id > best->id) best = &m;
  }
  return best;
}

std::vector<flightrec_marker> StaleMarkers(const std::vector<flightrec_marker>& markers,
                                           uint64_t now_ns, int64_t ttl_ns) {
  std::vector<flightrec_marker> out;
  for (const auto& m : markers) {
    if (m.time_ns + static_cast<uint64_t>(ttl_ns) < now_ns) out.push_back(m);
  }
  return out;
}

StatusOr<std::unique_ptr<ModuleBackend>> ModuleBackend::Create(const std::string& device,
                                                               const ModuleConfig& config) {
  auto b = std::unique_ptr<ModuleBackend>(new ModuleBackend);
  b->config_ = config;
  // A marker must outlive the hook's request (seconds): a floor keeps a tiny
  // --history from freeing markers before anyone could ask.
  b->config_.marker_ttl_ns = std::max<int64_t>(config.marker_ttl_ns, 1'000'000'000);
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
  ASSIGN_OR_RETURN(b->mode_, ResolveCallGraph(b->config_, b->info_.stack_bytes));
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
          {"data_ring_bytes_per_cpu", info_.data_ring_bytes},  // named as perf's, for status
          {"callchain", mode_.dwarf_stack_bytes ? "dwarf"
                        : mode_.callchain       ? "fp"
                                                : "none"},
          {"call_graph", mode_.ToString()},
          {"max_markers", info_.max_markers},
          {"marker_ttl_s", config_.marker_ttl_ns / 1e9},
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
    for (size_t i = 0; i < n; ++i) {
      if (recs[i].type == FLIGHTREC_SB_LOST) {
        sideband_lost_ += recs[i].len;
        ++sideband_gaps_;
      }
    }
    if (n < buf.size()) break;
  }
  for (const auto& e : OrderSideband(std::move(batch))) sink(e);
  // The daemon drains on a timer: the place to free markers nobody claimed.
  ReleaseStaleMarkers();
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

StatusOr<std::vector<flightrec_cpu_stats_ev>> ModuleBackend::ReadStats(flightrec_stats* global) {
  std::vector<flightrec_cpu_stats_ev> cpus(info_.nr_cpus);
  if (has_event_stats_) {
    *global = {};
    global->buf = reinterpret_cast<uint64_t>(cpus.data());
    global->count = static_cast<uint32_t>(cpus.size());
    global->flags = FLIGHTREC_STATS_EVENT;
    if (ioctl(fd_.get(), FLIGHTREC_IOC_STATS, global) == 0) {
      cpus.resize(std::min<size_t>(cpus.size(), global->count));
      return cpus;
    }
    if (errno != EINVAL) return ErrnoStatus("/dev/flightrec: STATS");
    has_event_stats_ = false;  // a module older than the flag: the plain counters
  }
  std::vector<flightrec_cpu_stats> plain(info_.nr_cpus);
  *global = {};
  global->buf = reinterpret_cast<uint64_t>(plain.data());
  global->count = static_cast<uint32_t>(plain.size());
  RETURN_IF_ERROR(Ioctl(fd_.get(), FLIGHTREC_IOC_STATS, global, "STATS"));
  cpus.resize(std::min<size_t>(cpus.size(), global->count));
  for (size_t i = 0; i < cpus.size(); ++i) cpus[i].s = plain[i];
  return cpus;
}

std::string EventStateName(int32_t state) {
  switch (state) {
    case FLIGHTREC_EVSTATE_NONE:
      return "none";
    case FLIGHTREC_EVSTATE_ACTIVE:
      return "active";
    case FLIGHTREC_EVSTATE_INACTIVE:
      return "inactive";
    case FLIGHTREC_EVSTATE_OFF:
      return "off";
    case FLIGHTREC_EVSTATE_ERROR:
      return "error";
    default:
      return "other";
  }
}

std::string CrashHookReason(const flightrec_stats& s, const std::string& hook_param,
                            const std::string& symbol_param) {
  switch (s.crash_hook) {
    case FLIGHTREC_HOOK_TRACEPOINT:
    case FLIGHTREC_HOOK_KPROBE:
    case FLIGHTREC_HOOK_UNKNOWN:
      return "";
    default:
      break;
  }
  if (s.crash_hook_error == 0) {
    return fmt::format("flightrec.ko was loaded with crash_hook={}",
                       hook_param.empty() ? "none" : hook_param);
  }
  const int e = -s.crash_hook_error;
  std::string what = hook_param == "kprobe" ? "its kprobe hook"
                     : hook_param == "tracepoint"
                         ? "its tracepoint hook (signal_deliver)"
                         : "its tracepoint (signal_deliver) and kprobe hooks";
  std::string sym = symbol_param.empty() ? "vfs_coredump/do_coredump" : symbol_param;
  if (hook_param != "tracepoint") what += fmt::format(" on {}", sym);
  return fmt::format("flightrec.ko could not attach {}: {} ({})", what, std::strerror(e),
                     e == ENOENT ? "ENOENT: no such symbol or tracepoint in this kernel"
                                 : fmt::format("errno {}", e));
}

StatusOr<Snapshot> ModuleBackend::TakeSnapshot(int64_t last_ns) {
  ReleaseStaleMarkers();
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
  uint64_t produced = 0, overwritten = 0, frozen = 0, size = 0, torn = 0, outside = 0, kept = 0;
  uint64_t malformed_bytes = 0;
  std::vector<uint8_t> data(info_.data_ring_bytes);
  std::vector<uint8_t> aux(info_.aux_ring_bytes + 4096);
  uint64_t throttled = 0, not_active = 0;
  for (const auto& ce : cpus) {
    const flightrec_cpu_stats& c = ce.s;
    if (!c.online && c.data_head == 0) continue;
    // DATA: everything still in the ring (from its first whole chunk; the
    // module starts there when `from` is older), up to the head the
    // counters were read at (a sample that was being written when FREEZE
    // came is not in them, and not copied).
    flightrec_read rd{};
    rd.cpu = c.cpu;
    rd.ring = FLIGHTREC_RING_DATA;
    rd.from = 0;
    rd.to = c.data_head;
    rd.buf = reinterpret_cast<uint64_t>(data.data());
    rd.buf_len = data.size();
    if (ioctl(fd_.get(), FLIGHTREC_IOC_READ_RING, &rd) != 0) {
      if (errno == ENODEV) continue;  // possible, never online
      return ErrnoStatus(fmt::format("/dev/flightrec: READ_RING data cpu {}", c.cpu));
    }
    uint64_t bad = 0;
    std::vector<SampleRecord> recs =
        ParseDataRecords(data.data() + rd.data_offset, rd.bytes, rd.first, &bad);
    malformed_bytes += bad;
    size_t n = recs.size();
    // AUX: the whole ring once, sliced per sample.
    flightrec_read ra{};
    ra.cpu = c.cpu;
    ra.ring = FLIGHTREC_RING_AUX;
    ra.from = c.aux_head > info_.aux_ring_bytes ? c.aux_head - info_.aux_ring_bytes : 0;
    ra.to = c.aux_head;
    ra.buf = reinterpret_cast<uint64_t>(aux.data());
    ra.buf_len = aux.size();
    // fp and none records carry no stack bytes: the AUX ring is not read.
    bool have_aux = mode_.dwarf_stack_bytes > 0 && info_.aux_ring_bytes > 0 && c.aux_head > 0 &&
                    ioctl(fd_.get(), FLIGHTREC_IOC_READ_RING, &ra) == 0;
    CpuCopy copy;
    copy.records = recs.data();
    copy.count = n;
    if (have_aux) {
      copy.aux = aux.data() + ra.data_offset;
      copy.aux_first = ra.first;
      copy.aux_end = ra.next;
    }
    size_t before = snap.samples.size();
    uint64_t cpu_outside = AppendSamples(copy, snap.window_start_ns, period, mode_, &snap.samples);
    uint64_t cpu_kept = snap.samples.size() - before;
    produced += c.produced;
    overwritten += c.overwritten;
    frozen += c.dropped_frozen;
    size += c.dropped_size;
    // Bytes this read lost to the writer (torn_on_read is the module's
    // lifetime count over every reader's copies). Their records are already
    // in `overwritten`: the writer counts a chunk's records when it starts
    // to reuse it.
    torn += rd.data_offset;
    outside += cpu_outside;
    kept += cpu_kept;
    throttled += ce.throttled;
    // An online CPU whose counter is not counting (ERROR: a pinned event
    // that could not be scheduled) samples nothing, and no counter says so.
    if (c.online && has_event_stats_ && ce.event_state != FLIGHTREC_EVSTATE_ACTIVE) ++not_active;
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
                            {"torn_bytes", rd.data_offset},
                            {"torn_on_read_lifetime", c.torn_on_read},
                            {"aux_written", c.aux_written},
                            {"aux_overwritten", c.aux_overwritten}});
    if (has_event_stats_) {
      // Throttled periods produce no sample and are in no other counter;
      // time_running < time_enabled means the counter was not counting for
      // part of its life (multiplexed out or in ERROR state).
      auto& pc = snap.per_cpu.back();
      pc["throttled"] = ce.throttled;
      pc["event_state"] = EventStateName(ce.event_state);
      pc["time_enabled_ns"] = ce.time_enabled;
      pc["time_running_ns"] = ce.time_running;
    }
  }
  std::sort(snap.samples.begin(), snap.samples.end(),
            [](const Sample& a, const Sample& b) { return a.time_ns < b.time_ns; });
  if (!snap.samples.empty()) snap.oldest_sample_ns = snap.samples.front().time_ns;
  snap.counters = {{"produced", produced},
                   {"in_window", kept},
                   {"outside_window", outside},
                   {"overwritten", overwritten},
                   {"paused", frozen},
                   {"size", size},
                   {"torn_bytes", torn},
                   {"malformed_bytes", malformed_bytes},
                   {"in_ring", kept + outside},
                   {"throttled", throttled},
                   {"cpus_not_counting", not_active},
                   {"sideband_lost", sideband_lost_}};
  // The module's counters are exact: produced == written + frozen + size,
  // and written == in ring + overwritten (frozen, read whole).
  snap.unaccounted = static_cast<int64_t>(produced) -
                     static_cast<int64_t>(kept + outside + overwritten + frozen + size);
  snap.copy_ns = MonotonicNs() - t0;
  return snap;
}

StatusOr<std::vector<flightrec_marker>> ModuleBackend::ListMarkers() {
  std::vector<flightrec_marker> m(std::max<uint32_t>(info_.max_markers, 1));
  for (;;) {
    flightrec_markers l{};
    l.buf = reinterpret_cast<uint64_t>(m.data());
    l.count = static_cast<uint32_t>(m.size());
    RETURN_IF_ERROR(Ioctl(fd_.get(), FLIGHTREC_IOC_LIST_MARKERS, &l, "LIST_MARKERS"));
    if (l.count <= m.size()) {
      m.resize(l.count);
      return m;
    }
    m.resize(l.count);  // more than max_markers: a newer module; list again
  }
}

void ModuleBackend::ReleaseStaleMarkers() {
  if (info_.max_markers == 0) return;
  auto markers = ListMarkers();
  if (!markers.ok()) {
    marker_error_ = markers.status().message();
    return;
  }
  for (const auto& m :
       StaleMarkers(*markers, static_cast<uint64_t>(MonotonicNs()), config_.marker_ttl_ns)) {
    if (ioctl(fd_.get(), FLIGHTREC_IOC_RELEASE_MARKER, static_cast<unsigned long>(m.slot)) == 0) {
      ++markers_released_unclaimed_;
    } else if (errno != ENOENT) {  // ENOENT: another reader freed it
      marker_error_ =
          ErrnoStatus(fmt::format("/dev/flightrec: RELEASE_MARKER {}", m.slot)).message();
    }
  }
}

StatusOr<Snapshot> ModuleBackend::TakeCrashSnapshot(uint32_t pid, int64_t last_ns,
                                                    int64_t wait_ns) {
  // The kernel claims the marker at the start of the core dump, before it
  // starts the core_pattern handler that asks for it, and copies the rings
  // into it right after (a kworker); the marker is listed once that copy is
  // done. poll() on the device sleeps until a marker becomes ready since
  // our last LIST_MARKERS, so this waits for the event, bounded by wait_ns.
  const int64_t t0 = MonotonicNs();
  const flightrec_marker* found = nullptr;
  std::vector<flightrec_marker> markers;
  for (;;) {
    ASSIGN_OR_RETURN(markers, ListMarkers());
    found = FindMarker(markers, pid, static_cast<uint64_t>(MonotonicNs()), config_.marker_ttl_ns);
    const int64_t left = wait_ns - (MonotonicNs() - t0);
    if (found != nullptr || left <= 0) break;
    pollfd pfd{fd_.get(), POLLIN, 0};
    const int ms = static_cast<int>(std::min<int64_t>((left + 999'999) / 1'000'000, 60'000));
    if (poll(&pfd, 1, ms) < 0 && errno != EINTR) return ErrnoStatus("/dev/flightrec: poll");
  }
  const int64_t waited = MonotonicNs() - t0;
  if (found == nullptr) {
    flightrec_stats global{};
    auto st = ReadStats(&global);
    return NotFound(fmt::format(
        "no crash marker for pid {} after {} ms ({} marker slots, {} in use; {} crashes "
        "found every slot in use)",
        pid, waited / 1'000'000, info_.max_markers, markers.size(),
        st.ok() ? global.markers_dropped : 0));
  }
  const flightrec_marker m = *found;
  auto snap = SnapshotFromMarker(m, last_ns);
  // Claimed, copied or not: the slot is freed for the next crash.
  if (ioctl(fd_.get(), FLIGHTREC_IOC_RELEASE_MARKER, static_cast<unsigned long>(m.slot)) == 0)
    ++markers_claimed_;
  if (!snap.ok()) return snap.status();
  snap->source["waited_ns"] = waited;
  return snap;
}

StatusOr<Snapshot> ModuleBackend::SnapshotFromMarker(const flightrec_marker& m, int64_t last_ns) {
  Snapshot snap;
  const int64_t t0 = MonotonicNs();
  snap.freeze_time_ns = m.time_ns;  // the history ends at the crash
  snap.window_start_ns = last_ns > 0 && static_cast<uint64_t>(last_ns) < m.time_ns
                             ? m.time_ns - static_cast<uint64_t>(last_ns)
                             : 0;
  const uint64_t period = SamplePeriodNs();
  uint64_t in_marker = 0, overwritten_bytes = 0, malformed_bytes = 0, outside = 0, kept = 0;
  uint64_t crasher_last = 0;
  uint32_t crasher_cpu = 0;
  bool crasher_last_on_cpu = false;
  std::vector<uint8_t> data, aux;
  for (uint32_t cpu = 0; cpu < m.nr_cpus && cpu < info_.nr_cpus; ++cpu) {
    // Two calls per ring: the preserved size, then the bytes.
    auto read = [&](uint32_t ring, std::vector<uint8_t>* buf,
                    flightrec_marker_read* r) -> StatusOr<bool> {
      *r = {};
      r->slot = m.slot;
      r->cpu = cpu;
      r->ring = ring;
      if (ioctl(fd_.get(), FLIGHTREC_IOC_READ_MARKER, r) != 0) {
        if (errno == ENODEV) return false;  // not a possible CPU
        return ErrnoStatus(fmt::format("/dev/flightrec: READ_MARKER slot {} cpu {}", m.slot, cpu));
      }
      buf->resize(r->total_bytes);
      r->buf = reinterpret_cast<uint64_t>(buf->data());
      r->buf_len = buf->size();
      if (ioctl(fd_.get(), FLIGHTREC_IOC_READ_MARKER, r) != 0) {
        return ErrnoStatus(fmt::format("/dev/flightrec: READ_MARKER slot {} cpu {}", m.slot, cpu));
      }
      buf->resize(r->bytes);
      return true;
    };
    flightrec_marker_read rd, ra;
    ASSIGN_OR_RETURN(bool possible, read(FLIGHTREC_RING_DATA, &data, &rd));
    if (!possible) continue;
    uint64_t bad = 0;
    std::vector<SampleRecord> recs = ParseDataRecords(data.data(), data.size(), rd.first, &bad);
    malformed_bytes += bad;
    CpuCopy copy;
    copy.records = recs.data();
    copy.count = recs.size();
    if (mode_.dwarf_stack_bytes > 0) {
      ASSIGN_OR_RETURN(bool aux_ok, read(FLIGHTREC_RING_AUX, &aux, &ra));
      if (aux_ok) {
        copy.aux = aux.data();
        copy.aux_first = ra.first;
        copy.aux_end = ra.first + aux.size();
      }
    }
    for (size_t i = 0; i < copy.count; ++i) {
      const auto& r = copy.records[i].h;
      if (r.tid == m.tid && r.time_ns >= crasher_last) {
        crasher_last = r.time_ns;
        crasher_cpu = cpu;
        crasher_last_on_cpu = i + 1 == copy.count;
      }
    }
    size_t before = snap.samples.size();
    uint64_t cpu_outside = AppendSamples(copy, snap.window_start_ns, period, mode_, &snap.samples);
    uint64_t cpu_kept = snap.samples.size() - before;
    // The marker keeps DATA positions (bytes), not record counts: what lies
    // below `first` was overwritten before the crash or while the kernel
    // copied the other CPUs' rings, a number of records it does not keep.
    in_marker += copy.count;
    overwritten_bytes += rd.first;
    outside += cpu_outside;
    kept += cpu_kept;
    snap.per_cpu.push_back({{"cpu", cpu},
                            {"position_at_crash", rd.end},
                            {"in_marker", copy.count},
                            {"in_window", cpu_kept},
                            {"outside_window", cpu_outside},
                            {"overwritten_bytes", rd.first}});
  }
  std::sort(snap.samples.begin(), snap.samples.end(),
            [](const Sample& a, const Sample& b) { return a.time_ns < b.time_ns; });
  if (!snap.samples.empty()) snap.oldest_sample_ns = snap.samples.front().time_ns;
  // At the crash instant the module keeps ring positions, not its drop
  // counters: samples dropped while frozen or for size before the crash are
  // not known here (they are in the module's live counters).
  snap.counters = {{"in_ring", in_marker},
                   {"in_window", kept},
                   {"outside_window", outside},
                   {"overwritten_bytes", overwritten_bytes},
                   {"malformed_bytes", malformed_bytes}};
  snap.unaccounted = 0;  // positions only: nothing to check the records against
  snap.copy_ns = MonotonicNs() - t0;
  snap.source = {{"kind", "crash_marker"},
                 {"marker_id", m.id},
                 {"slot", m.slot},
                 {"pid", m.pid},
                 {"tid", m.tid},
                 {"signal", m.signal},
                 {"marker_time_mono_ns", m.time_ns},
                 {"read_after_ns", static_cast<uint64_t>(MonotonicNs()) - m.time_ns}};
  if (crasher_last) {
    // How close to the crash the crashing thread's history ends, and whether
    // nothing else ran on its CPU between its last sample and the crash.
    snap.source["crashing_thread_last_sample_mono_ns"] = crasher_last;
    snap.source["crashing_thread_gap_ns"] = m.time_ns - crasher_last;
    snap.source["crashing_thread_cpu"] = crasher_cpu;
    snap.source["crashing_thread_last_on_its_cpu"] = crasher_last_on_cpu;
  }
  snap.source["sample_period_ns"] = period;
  return snap;
}

nlohmann::json ModuleBackend::Stats() {
  ReleaseStaleMarkers();
  flightrec_stats global{};
  auto cpus = ReadStats(&global);
  nlohmann::json j = Describe();
  if (!cpus.ok()) {
    j["error"] = cpus.status().message();
    return j;
  }
  uint64_t produced = 0, written = 0, handler_ns = 0;
  nlohmann::json per_cpu = nlohmann::json::array();
  for (const auto& c : *cpus) {
    produced += c.s.produced;
    written += c.s.written;
    handler_ns += c.s.handler_ns;
    // The module's own time in its sample handler (STATS handler_ns).
    per_cpu.push_back({{"cpu", c.s.cpu},
                       {"produced", c.s.produced},
                       {"handler_ns", c.s.handler_ns},
                       {"handler_ns_per_sample",
                        c.s.produced ? static_cast<double>(c.s.handler_ns) / c.s.produced : 0.0}});
  }
  j["produced"] = produced;
  j["written"] = written;
  j["handler_ns"] = handler_ns;
  j["handler_ns_per_sample"] = produced ? static_cast<double>(handler_ns) / produced : 0.0;
  j["per_cpu"] = std::move(per_cpu);
  j["sideband_written"] = global.sideband_written;
  j["sideband_dropped"] = global.sideband_dropped;
  j["markers_taken"] = global.markers_taken;
  j["markers_dropped"] = global.markers_dropped;
  j["markers_coalesced"] = global.markers_coalesced;
  j["markers_uid_limited"] = global.markers_uid_limited;
  j["markers_per_uid"] = info_.markers_per_uid;
  j["sideband_lost"] = sideband_lost_;
  j["sideband_gaps"] = sideband_gaps_;
  // Crash markers need a hook in the kernel's crash path; without one the
  // module still records, and status says why there are no markers.
  const bool hooked = global.crash_hook == FLIGHTREC_HOOK_TRACEPOINT ||
                      global.crash_hook == FLIGHTREC_HOOK_KPROBE ||
                      global.crash_hook == FLIGHTREC_HOOK_UNKNOWN;
  j["crash_markers_available"] = hooked && info_.max_markers > 0;
  j["crash_hook"] = global.crash_hook == FLIGHTREC_HOOK_TRACEPOINT ? "tracepoint signal_deliver"
                    : global.crash_hook == FLIGHTREC_HOOK_KPROBE   ? "kprobe"
                    : global.crash_hook == FLIGHTREC_HOOK_NONE     ? "none"
                                                                   : "unknown (older module)";
  if (!hooked) {
    j["crash_markers_unavailable"] =
        CrashHookReason(global, ReadModuleParam("crash_hook"), ReadModuleParam("coredump_symbol"));
    j["crash_hook_error"] = global.crash_hook_error;
  } else if (info_.max_markers == 0) {
    j["crash_markers_unavailable"] = "flightrec.ko was loaded with markers=0";
  }
  uint64_t throttled = 0, not_active = 0;
  for (const auto& c : *cpus) {
    throttled += c.throttled;
    if (c.s.online && has_event_stats_ && c.event_state != FLIGHTREC_EVSTATE_ACTIVE) ++not_active;
  }
  j["throttled"] = throttled;
  j["cpus_not_counting"] = not_active;
  auto markers = ListMarkers();
  j["markers_pending"] = markers.ok() ? markers->size() : 0;
  j["markers_claimed"] = markers_claimed_;
  j["markers_released_unclaimed"] = markers_released_unclaimed_;
  if (!marker_error_.empty()) j["marker_error"] = marker_error_;
  // Ring history at the observed mean record size (records are variable).
  uint64_t period = SamplePeriodNs();
  uint64_t heads = 0;
  for (const auto& c : *cpus) heads += c.s.data_head;
  if (period && written && heads) {
    double capacity = static_cast<double>(info_.data_ring_bytes) * written / heads;
    j["history_s"] = capacity * period / 1e9;
  }
  return j;
}

}  // namespace flightrec::recorder::module
