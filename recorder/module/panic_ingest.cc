#include "recorder/module/panic_ingest.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "common/checked_json.h"
#include "common/read_file.h"
#include "common/scoped_fd.h"
#include "common/terminal_escape.h"
#include "common/units.h"

namespace flightrec::recorder::module {
namespace {

std::string Slurp(const char* path) { return ReadFileToString(path, 256 << 20).value_or(""); }

// A module name from the region goes into "module NAME BASE SIZE" lines:
// only the characters module names have (scripts/Makefile.lib's modname).
bool PlainModuleName(const std::string& n) {
  if (n.empty()) return false;
  return std::all_of(n.begin(), n.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
}

std::string Hex(uint64_t v) { return fmt::format("0x{:x}", v); }

}  // namespace

KernelEnv KernelEnv::ReadRunning() {
  KernelEnv e;
  struct utsname u {};
  if (uname(&u) == 0) e.release = u.release;
  e.kallsyms = Slurp("/proc/kallsyms");
  e.modules = Slurp("/proc/modules");
  return e;
}

CrashedKernel CrashedKernelSymbols(const PanicRegion& r, const KernelEnv& env) {
  CrashedKernel k;
  // The crashed boot's modules, where they were: named without a symbol
  // ("[name]+0xoff") whatever else is known, and the base of their symbols.
  std::map<std::string, std::pair<uint64_t, uint64_t>> crashed;
  std::string module_lines;
  for (const auto& m : r.modules) {
    std::string name = FieldString(m.name, sizeof(m.name));
    if (!PlainModuleName(name) || m.base == 0 || m.size == 0 || m.size > kKernelImageSize) continue;
    crashed[name] = {m.base, m.size};
    module_lines += fmt::format("module {} {:x} {}\n", name, m.base, m.size);
  }
  auto unresolved = [&](std::string why) {
    k.note = std::move(why);
    k.symbols_text =
        module_lines + fmt::format("module kernel {:x} {}\n", kKernelImageStart, kKernelImageSize);
    return k;
  };
  if (r.release != env.release) {
    return unresolved(
        fmt::format("kernel release {} differs from running {}: kernel frames "
                    "unresolved",
                    r.release, env.release));
  }
  // This boot's `panic`, and its modules' bases (/proc/modules' address is
  // the module's core layout base, as the region's table records it).
  uint64_t panic_now = 0;
  std::istringstream in(env.kallsyms);
  std::string line;
  while (std::getline(in, line)) {
    unsigned long long addr = 0;
    char type = 0, name[64];
    if (std::sscanf(line.c_str(), "%llx %c %63s", &addr, &type, name) == 3 &&
        (type == 'T' || type == 't') && std::strcmp(name, "panic") == 0 &&
        line.find('[') == std::string::npos) {
      panic_now = addr;
      break;
    }
  }
  if (panic_now == 0 || r.header.kernel_anchor == 0) {
    return unresolved(fmt::format(
        "kernel release {} is running, but {}: kernel frames unresolved", r.release,
        panic_now == 0 ? "this boot's /proc/kallsyms gives no address for panic (kptr_restrict?)"
                       : "the region has no kernel anchor"));
  }
  std::map<std::string, uint64_t> base_now;
  std::istringstream mods(env.modules);
  while (std::getline(mods, line)) {
    char name[128], deps[4096], state[32];
    unsigned long long size = 0, base = 0;
    int refs = 0;
    if (std::sscanf(line.c_str(), "%127s %llu %d %4095s %31s %llx", name, &size, &refs, deps, state,
                    &base) == 6 &&
        base != 0) {
      base_now[name] = base;
    }
  }
  const uint64_t delta = r.header.kernel_anchor - panic_now;  // modulo 2^64
  k.kaslr_delta = static_cast<int64_t>(delta);
  std::string text = module_lines;
  text.reserve(env.kallsyms.size() + module_lines.size());
  std::istringstream all(env.kallsyms);
  size_t shifted_modules = 0;
  while (std::getline(all, line)) {
    unsigned long long addr = 0;
    char type = 0, name[512], mod[128];
    int n = std::sscanf(line.c_str(), "%llx %c %511s [%127[^]]]", &addr, &type, name, mod);
    if (n < 3 || addr == 0) continue;
    if (n == 3) {
      text += fmt::format("{:016x} {} {}\n", addr + delta, type, name);
      continue;
    }
    // A module's symbols move with its base: the same .ko lays its text
    // out the same way in both boots.
    auto c = crashed.find(mod);
    auto b = base_now.find(mod);
    if (c == crashed.end() || b == base_now.end() || addr < b->second) continue;
    text +=
        fmt::format("{:016x} {} {}\t[{}]\n", addr - b->second + c->second.first, type, name, mod);
    ++shifted_modules;
  }
  k.symbols_text = std::move(text);
  k.resolved = true;
  k.note = fmt::format(
      "kernel release {} is running: frames resolved with this boot's symbols, KASLR delta {} "
      "(the crashed boot's panic at {}, this boot's at {}), {} modules from the crashed boot's "
      "table",
      r.release, static_cast<int64_t>(delta), Hex(r.header.kernel_anchor), Hex(panic_now),
      crashed.size());
  (void)shifted_modules;
  return k;
}

std::string BuildIdIfSameFile(const MmapEvent& m) {
  if (m.filename.empty() || m.filename[0] != '/') return "";
  struct stat st {};
  if (stat(m.filename.c_str(), &st) != 0 || st.st_ino != m.ino) return "";
  return attribution::ReadBuildId(m.filename);
}

StatusOr<PanicDump> BuildPanicDump(const PanicRegion& r, const KernelEnv& env,
                                   const BuildIdFn& build_id) {
  const flightrec_panic_header& h = r.header;
  PanicDump d;
  d.cookies = std::make_unique<attribution::CookieTable>();
  d.history = std::make_unique<attribution::SidebandHistory>(d.cookies.get());
  const uint64_t period = h.period ? h.period : (h.freq ? 1'000'000'000ull / h.freq : 0);

  // Samples: the module backend's decoding, every record held (no window).
  Snapshot& snap = d.snap;
  snap.freeze_time_ns = h.panic_time_ns;
  snap.window_start_ns = 0;
  uint64_t held = 0, overwritten = 0, not_copied = 0, paused = 0, size = 0, produced = 0;
  uint64_t malformed = 0, claimed = 0;
  const CallGraphMode mode;  // fp: the region keeps no AUX (stack) bytes
  nlohmann::json cpus = nlohmann::json::array();
  for (const PanicCpu& c : r.cpus) {
    CpuCopy copy;
    copy.records = c.records.data();
    copy.count = c.records.size();
    AppendSamples(copy, 0, period, mode, &snap.samples);
    const flightrec_panic_cpu& p = c.desc;
    held += c.records.size();
    claimed += p.records;
    overwritten += p.overwritten;
    not_copied += p.not_copied;
    paused += p.dropped_frozen;
    size += p.dropped_size;
    produced += p.produced;
    malformed += c.malformed_bytes;
    nlohmann::json pc = {{"cpu", p.cpu},
                         {"online", (p.flags & FLIGHTREC_PANIC_CPU_ONLINE) != 0},
                         {"panicking", (p.flags & FLIGHTREC_PANIC_CPU_PANICKING) != 0},
                         {"cut", (p.flags & FLIGHTREC_PANIC_CPU_CUT) != 0},
                         {"torn", (p.flags & FLIGHTREC_PANIC_CPU_TORN) != 0},
                         {"produced", p.produced},
                         {"written", p.written},
                         {"records", p.records},
                         {"held", c.records.size()},
                         {"overwritten", p.overwritten},
                         {"not_copied", p.not_copied},
                         {"paused", p.dropped_frozen},
                         {"size", p.dropped_size},
                         {"malformed_bytes", c.malformed_bytes},
                         {"last_time_mono_ns", p.last_time_ns},
                         {"data_first", p.data_first},
                         {"data_end", p.data_end}};
    snap.per_cpu.push_back(pc);
    cpus.push_back(std::move(pc));
  }
  // The panic record: the panicking CPU's stack at the panic (panic()'s
  // callers), one more sample at the panic's time. It is in no counter.
  bool have_rec = false;
  if (r.panic_record) {
    snap.samples.push_back(SampleFromRecord(*r.panic_record, period, nullptr, nullptr, 0, mode));
    have_rec = true;
  }
  std::sort(snap.samples.begin(), snap.samples.end(),
            [](const Sample& a, const Sample& b) { return a.time_ns < b.time_ns; });
  if (!snap.samples.empty()) snap.oldest_sample_ns = snap.samples.front().time_ns;
  if (!snap.samples.empty() && snap.samples.back().time_ns > snap.freeze_time_ns) {
    snap.freeze_time_ns = snap.samples.back().time_ns;
  }
  // As the module backend's: the index's `lost` is paused + overwritten;
  // not_copied (in the ring at the panic, beyond this CPU's share of the
  // region) is its own cause.
  using LC = LossCounter;
  snap.counters.Set(LC::kProduced, produced);
  snap.counters.Set(LC::kInRing, held);
  snap.counters.Set(LC::kInWindow, held);
  snap.counters.Set(LC::kOutsideWindow, 0);
  snap.counters.Set(LC::kOverwritten, overwritten);
  snap.counters.Set(LC::kNotCopied, not_copied);
  snap.counters.Set(LC::kPaused, paused);
  snap.counters.Set(LC::kSize, size);
  snap.counters.Set(LC::kMalformedBytes, malformed);
  // written == overwritten + not_copied + records, produced == written +
  // paused + size: what the region held must add up to what it claims.
  // In u64, wrapping: the region's counters are the crashed boot's, as
  // hostile as any file, and a signed difference of two of them overflows.
  snap.unaccounted =
      static_cast<int64_t>(produced - (held + overwritten + not_copied + paused + size));
  snap.source = {{"kind", "panic_region"},
                 {"boot_id", r.boot_id},
                 {"panic_cpu", h.panic_cpu},
                 {"panic_time_mono_ns", h.panic_time_ns},
                 {"sample_period_ns", period}};

  // Sideband: the crashed boot's mappings, in the module backend's order.
  uint64_t sideband_lost = 0;
  std::map<std::pair<std::string, uint64_t>, std::string> ids;
  for (Event& e : OrderSideband(r.sideband)) {
    if (auto* m = std::get_if<MmapEvent>(&e)) {
      auto key = std::make_pair(m->filename, m->ino);
      auto it = ids.find(key);
      if (it == ids.end()) it = ids.emplace(key, build_id(*m)).first;
      m->build_id = it->second;
    } else if (auto* l = std::get_if<LostEvent>(&e)) {
      sideband_lost += l->count;
    }
    d.history->Add(e);
  }
  snap.counters.Set(LossCounter::kSidebandLost, sideband_lost);

  CrashedKernel kernel = CrashedKernelSymbols(r, env);
  ASSIGN_OR_RETURN(d.ksyms, attribution::KernelSymbols::FromText(kernel.symbols_text));

  d.mono_to_wall_ns = h.mono_to_real_ns;
  d.mono_to_boot_ns = h.mono_to_boot_ns;
  d.last_ns = snap.oldest_sample_ns && snap.freeze_time_ns > snap.oldest_sample_ns
                  ? static_cast<int64_t>(snap.freeze_time_ns - snap.oldest_sample_ns)
                  : 0;
  const uint64_t hz = h.freq ? h.freq : (h.period ? 1'000'000'000ull / h.period : 0);
  d.backend = {{"backend", "module"},
               {"event", h.event == FLIGHTREC_EVENT_CYCLES ? "cycles" : "cpu-clock"},
               {"frequency_hz", hz},
               {"period", h.period},
               {"cpus", h.nr_cpus},
               {"stack_bytes", h.stack_bytes},
               {"source", "panic region"}};

  nlohmann::json modules = nlohmann::json::array();
  for (const auto& m : r.modules) {
    nlohmann::json mj = {{"base", m.base}, {"size", m.size}};
    json::SetText(mj, "name", FieldString(m.name, sizeof(m.name)));
    modules.push_back(std::move(mj));
  }
  nlohmann::json& p = d.panic;
  p = nlohmann::json::object();
  p["reason"] = "kernel panic";
  json::SetText(p, "message", r.panic_msg);
  p["boot_id"] = r.boot_id;
  json::SetText(p, "release", r.release);
  json::SetText(p, "running_release", env.release);
  p["panic_cpu"] = h.panic_cpu;
  p["panic_time_mono_ns"] = h.panic_time_ns;
  // Both terms are the crashed boot's (a hostile region's): a wall-clock
  // time outside int64 is left out and named, not wrapped into a date.
  int64_t wall_ns = 0;
  const bool have_wall = !__builtin_add_overflow(h.panic_time_ns, h.mono_to_real_ns, &wall_ns);
  if (have_wall) p["panic_time_ns"] = wall_ns;
  p["mono_to_real_ns"] = h.mono_to_real_ns;
  p["mono_to_boot_ns"] = h.mono_to_boot_ns;
  p["arm_time_mono_ns"] = h.arm_time_ns;
  p["panics_lost"] = h.panics_lost;
  // At panic() entry by the kprobe (its callers: the path that panicked),
  // or in the notifier, after the panic's console output.
  p["taken_at"] = (h.flags & FLIGHTREC_PANIC_F_ENTRY) ? "panic_entry" : "notifier";
  if (have_rec) {
    const flightrec_sample& rh = r.panic_record->h;
    p["panic_record"] = {{"time_mono_ns", rh.time_ns},
                         {"cpu", rh.cpu},
                         {"pid", rh.pid},
                         {"tid", rh.tid},
                         {"kernel_frames", rh.nr_kframes},
                         {"user_frames", rh.nr_uframes}};
  }
  p["kernel_anchor"] = h.kernel_anchor;
  p["kernel_frames"] = kernel.resolved ? "resolved" : "unresolved";
  json::SetText(p, "kernel_frames_note", kernel.note);
  if (kernel.resolved) p["kaslr_delta"] = kernel.kaslr_delta;
  p["modules"] = std::move(modules);
  p["cpus"] = std::move(cpus);
  p["nr_cpus"] = h.nr_cpus;
  p["samples_held"] = held;
  p["records_claimed"] = claimed;
  p["sideband"] = {{"records", r.sideband.size()},
                   {"ok", r.sideband_ok},
                   {"first_seq", h.sb_first_seq},
                   {"missing", h.sb_missing},
                   {"lost", sideband_lost}};
  p["region"] = {{"size", h.region_size}, {"bytes_read", r.bytes}};
  p["sampling"] = {{"event", d.backend["event"]},
                   {"period", h.period},
                   {"freq", h.freq},
                   {"stack_bytes", h.stack_bytes}};
  nlohmann::json damaged = nlohmann::json::array();
  for (const auto& line : r.damaged) damaged.push_back(line);
  if (!have_wall) {
    damaged.push_back(fmt::format(
        "header: panic time {} + mono_to_real_ns {} is no wall-clock time: timestamp unknown",
        h.panic_time_ns, h.mono_to_real_ns));
  }
  if (h.sb_missing > 0) {
    damaged.push_back(fmt::format(
        "sideband: {} older records were no longer in the ring at the panic: mappings they "
        "announced are unknown",
        h.sb_missing));
  }
  if (h.panics_lost > 0) {
    damaged.push_back(fmt::format(
        "{} later panic{} found this region unclaimed: {} history was not recorded", h.panics_lost,
        h.panics_lost == 1 ? "" : "s", h.panics_lost == 1 ? "its" : "their"));
  }
  p["damaged"] = damaged;

  nlohmann::json& s = d.summary;
  s = nlohmann::json::object();
  json::SetText(s, "message", r.panic_msg);
  s["boot_id"] = r.boot_id;
  json::SetText(s, "release", r.release);
  s["panic_cpu"] = h.panic_cpu;
  if (have_wall) s["time_ns"] = wall_ns;
  s["panics_lost"] = h.panics_lost;
  s["samples"] = held;
  s["cpus"] = r.cpus.size();
  s["damaged"] = damaged.size();
  s["kernel_frames"] = p["kernel_frames"];
  return d;
}

namespace {

std::string FoundError(int32_t err) {
  switch (-err) {
    case EBADMSG:
      return "EBADMSG: bad header checksum";
    case EPROTO:
      return "EPROTO: unknown version";
    case EINVAL:
      return "EINVAL: inconsistent sizes";
    case EBUSY:
      return "EBUSY: the range is System RAM; reserve it on the kernel command line with "
             "memmap=SIZE$ADDR";
    case ENOMEM:
      return "ENOMEM: mapping it failed";
    default:
      return fmt::format("errno {}", -err);
  }
}

}  // namespace

std::optional<PanicClaim> ClaimFromInfo(const flightrec_panic_info& info,
                                        const std::string& where) {
  using O = PanicClaim::Outcome;
  PanicClaim c;
  switch (info.state) {
    case FLIGHTREC_PANIC_NONE:
      return c;
    case FLIGHTREC_PANIC_EMPTY:
      c.outcome = O::kEmpty;
      c.message = fmt::format(
          "no panic record from an earlier boot (panic region {} armed for this boot)", where);
      return c;
    case FLIGHTREC_PANIC_REFUSED:
      c.outcome = O::kRefused;
      c.message = fmt::format(
          "panic region {}: refused what an earlier boot left there ({}); nothing stored, the "
          "region is armed for this boot",
          where, FoundError(info.error));
      return c;
    case FLIGHTREC_PANIC_UNAVAILABLE:
      c.outcome = O::kUnavailable;
      c.message =
          fmt::format("panic region {} configured but unusable: {}", where, FoundError(info.error));
      return c;
    case FLIGHTREC_PANIC_HELD:
      return std::nullopt;
    default:
      c.outcome = O::kFailed;
      c.message = fmt::format("panic region: unknown state {} from PANIC_INFO", info.state);
      return c;
  }
}

PanicClaim ClaimPanicRegion(const std::string& device, const std::function<KernelEnv()>& env,
                            const StorePanicFn& store) {
  using O = PanicClaim::Outcome;
  PanicClaim c;
  ScopedFd fd(open(device.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd) {
    c.outcome = O::kFailed;
    c.message = ErrnoStatus(fmt::format("panic region: opening {}", device)).message();
    return c;
  }
  flightrec_panic_info info{};
  if (ioctl(fd.get(), FLIGHTREC_IOC_PANIC_INFO, &info) != 0) {
    if (errno == ENOTTY) return c;  // a module without panic support
    c.outcome = O::kFailed;
    c.message = ErrnoStatus("panic region: PANIC_INFO").message();
    return c;
  }
  const std::string where =
      fmt::format("at {} ({})", Hex(info.region_phys), FormatBytes(info.region_size));
  if (auto known = ClaimFromInfo(info, where)) return *known;
  // Read it whole, in bounded pieces; a module that returns fewer bytes
  // than it holds ends the read (the parser names what is missing).
  const uint64_t want = std::min<uint64_t>(info.held_bytes, kMaxPanicRegionBytes);
  std::vector<uint8_t> bytes(want);
  uint64_t got = 0;
  while (got < want) {
    flightrec_panic_read rd{};
    rd.offset = got;
    rd.buf = reinterpret_cast<uint64_t>(bytes.data() + got);
    rd.buf_len = std::min<uint64_t>(want - got, 1u << 20);
    if (ioctl(fd.get(), FLIGHTREC_IOC_PANIC_READ, &rd) != 0) {
      c.outcome = O::kFailed;
      c.message =
          ErrnoStatus(fmt::format("panic region {}: PANIC_READ at {}", where, got)).message() +
          " (kept for the next start)";
      return c;
    }
    if (rd.bytes == 0 || rd.bytes > rd.buf_len) break;
    got += rd.bytes;
  }
  auto release = [&]() -> std::string {
    if (ioctl(fd.get(), FLIGHTREC_IOC_PANIC_RELEASE, 0) == 0) return "";
    return "; " + ErrnoStatus("PANIC_RELEASE").message();
  };
  bytes.resize(got);
  return StoreHeldRegion(bytes, where, env, store, release);
}

PanicClaim StoreHeldRegion(const std::vector<uint8_t>& bytes, const std::string& where,
                           const std::function<KernelEnv()>& env, const StorePanicFn& store,
                           const std::function<std::string()>& release) {
  using O = PanicClaim::Outcome;
  PanicClaim c;
  auto region = ParsePanicRegion(bytes.data(), bytes.size());
  if (!region.ok()) {
    c.outcome = O::kRefused;
    if (region.status().code() == StatusCode::kUnsupported) {
      // A newer module's layout: a newer recorder can read it; keep it.
      c.message = fmt::format("panic region {}: {}; kept for a recorder that reads it", where,
                              region.status().message());
      return c;
    }
    c.message = fmt::format("panic region {}: {}; nothing stored, the region is released{}", where,
                            region.status().message(), release());
    return c;
  }
  auto dump = BuildPanicDump(*region, env());
  if (!dump.ok()) {
    c.outcome = O::kFailed;
    c.message = fmt::format("panic region {}: {} (kept for the next start)", where,
                            dump.status().message());
    return c;
  }
  const size_t damaged = dump->panic["damaged"].size();
  // Why kernel frames stay "[kernel]+0x..." belongs in the log line too.
  std::string unresolved;
  if (dump->panic.value("kernel_frames", "") != "resolved") {
    unresolved = "; " + EscapeForTerminal(json::RawText(dump->panic, "kernel_frames_note"));
  }
  const size_t samples = dump->snap.samples.size();
  auto id = store(*dump);
  if (!id.ok()) {
    c.outcome = O::kFailed;
    c.message =
        fmt::format("panic region {}: storing the record failed: {} (kept for the next start)",
                    where, id.status().message());
    return c;
  }
  c.outcome = O::kStored;
  c.record_id = *id;
  c.message = fmt::format(
      "stored panic record {} from boot {} (kernel {}, {} samples on {} CPUs{}{}){}", *id,
      region->boot_id, EscapeForTerminal(region->release), samples, region->cpus.size(),
      damaged ? fmt::format("; {} damaged parts named in the record", damaged) : "", unresolved,
      release());
  return c;
}

}  // namespace flightrec::recorder::module
