// The pure half of the module backend: flightrec.ko's ring records and
// sideband into events, crash marker selection, and the names and reasons
// status reports. No device access here, so the unit test covers all of it.
#include <linux/perf_event.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "recorder/module/module_backend.h"

namespace flightrec::recorder::module {
namespace {

// Registers present in an AUX blob: all FLIGHTREC_NR_REGS, in the bit order
// of arch/x86/include/uapi/asm/perf_regs.h, as perf's regs_mask.
constexpr uint64_t kAuxRegsMask = (1ull << FLIGHTREC_NR_REGS) - 1;

std::string PathOf(const flightrec_sideband& r) {
  return std::string(r.path, strnlen(r.path, sizeof(r.path)));
}

// An event of type E with the time and task that every module record
// (flightrec_sideband, flightrec_sample) carries.
template <typename E, typename R>
E TaskStamped(const R& r) {
  E e;
  e.time_ns = r.time_ns;
  e.pid = r.pid;
  e.tid = r.tid;
  return e;
}

}  // namespace

std::optional<Event> SidebandEvent(const flightrec_sideband& r) {
  switch (r.type) {
    case FLIGHTREC_SB_MMAP: {
      auto m = TaskStamped<MmapEvent>(r);
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
      auto c = TaskStamped<CommEvent>(r);
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
      auto t = TaskStamped<TaskEvent>(r);
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
  auto s = TaskStamped<Sample>(r);
  s.cpu = r.cpu;
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

std::vector<Event> OrderSideband(std::vector<flightrec_sideband> batch) {
  // The module reports an exec when it completes (sched_process_exec), after
  // the new image's mappings were made: load_elf_binary maps the executable
  // (the exec record's file: for a #! script, its interpreter), then the
  // program interpreter. The process table clears an address space on exec,
  // so the exec must come before those mappings: it is moved before the
  // newest run of mappings of the exec'd file since the pid's previous
  // fork/exec record (or, when that file was not seen mapped, a record lost,
  // before the pid's first mapping since that fork/exec).
  //
  // A drain can fall inside an exec: the executable's mapping then went out
  // with the previous batch, and only the interpreter's is in this one. The
  // exec then only renames the process, as when none of its mappings is in
  // this batch: clearing here would drop the executable's mapping (CI saw a
  // crash's own frames left [unknown] on PREEMPT_RT). The old image's
  // mappings stay, under the new image's where they overlap.
  std::vector<Event> out;
  std::vector<std::optional<Event>> events;
  for (const auto& r : batch) events.push_back(SidebandEvent(r));
  for (size_t i = 0; i < batch.size(); ++i) {
    const flightrec_sideband& x = batch[i];
    if (x.type != FLIGHTREC_SB_EXEC || !events[i]) continue;
    size_t first_map = i, image = i;
    bool bounded = false, run_over = false;
    for (size_t j = i; j-- > 0;) {
      const flightrec_sideband& r = batch[j];
      if (r.pid != x.pid) continue;
      if (r.type == FLIGHTREC_SB_FORK || r.type == FLIGHTREC_SB_EXEC) {
        bounded = true;
        break;
      }
      const bool exe = r.type == FLIGHTREC_SB_MMAP && r.ino == x.ino && r.dev == x.dev;
      if (r.type == FLIGHTREC_SB_MMAP) first_map = j;
      if (exe && !run_over) {
        image = j;
      } else if (image != i) {
        run_over = true;
      }
    }
    if (image == i && bounded) image = first_map;
    if (image == i) {
      std::get<CommEvent>(*events[i]).exec = false;
      continue;
    }
    auto exec = std::move(events[i]);
    events.erase(events.begin() + static_cast<std::ptrdiff_t>(i));
    events.insert(events.begin() + static_cast<std::ptrdiff_t>(image), std::move(exec));
    auto rec = batch[i];
    batch.erase(batch.begin() + static_cast<std::ptrdiff_t>(i));
    batch.insert(batch.begin() + static_cast<std::ptrdiff_t>(image), rec);
  }
  for (auto& e : events) {
    if (e) out.push_back(std::move(*e));
  }
  return out;
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

}  // namespace flightrec::recorder::module
