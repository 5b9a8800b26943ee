#include "coredump-hook/backtrace.h"

#include <elfutils/libdwfl.h>
#include <libunwind-coredump.h>

#include <algorithm>

#include "coredump-hook/core_notes.h"
#include "recorder/attribution/attribution.h"
#include "recorder/elf/elf_handle.h"
#include "recorder/symbolize/symbolizer.h"

namespace flightrec::coredump {

namespace attribution = recorder::attribution;

namespace {

// elfutils' view of the same core (what systemd-coredump uses): modules from
// the core's NT_FILE note, unwind tables from the files on disk, CFI where
// libunwind's coredump accessors have no backing for a segment mapped at a
// non-zero file offset (every shared library's text). Thread order is the
// core's: the thread that took the signal first.
std::vector<std::pair<pid_t, std::vector<uint64_t>>> DwflWalk(const std::string& core_path,
                                                              size_t max_frames) {
  std::vector<std::pair<pid_t, std::vector<uint64_t>>> out;
  static const Dwfl_Callbacks kCallbacks = {
      .find_elf = dwfl_build_id_find_elf,
      .find_debuginfo = dwfl_standard_find_debuginfo,
      .section_address = dwfl_offline_section_address,
      .debuginfo_path = nullptr,
  };
  recorder::elf::ElfFile file = recorder::elf::ElfFile::Open(core_path);
  if (!file) return out;
  Elf* core = file.elf();
  Dwfl* dwfl = dwfl_begin(&kCallbacks);
  if (dwfl != nullptr && dwfl_core_file_report(dwfl, core, nullptr) >= 0 &&
      dwfl_report_end(dwfl, nullptr, nullptr) == 0 && dwfl_core_file_attach(dwfl, core) >= 0) {
    struct Ctx {
      std::vector<std::pair<pid_t, std::vector<uint64_t>>>* out;
      size_t max;
    } ctx{&out, max_frames};
    dwfl_getthreads(
        dwfl,
        [](Dwfl_Thread* thread, void* arg) -> int {
          auto* c = static_cast<Ctx*>(arg);
          c->out->emplace_back(dwfl_thread_tid(thread), std::vector<uint64_t>());
          dwfl_thread_getframes(
              thread,
              [](Dwfl_Frame* frame, void* a) -> int {
                auto* cc = static_cast<Ctx*>(a);
                Dwarf_Addr pc = 0;
                bool activation = false;
                if (!dwfl_frame_pc(frame, &pc, &activation)) return DWARF_CB_ABORT;
                auto& ips = cc->out->back().second;
                // Callers' pcs are return addresses, like the other walks.
                ips.push_back(pc);
                return ips.size() >= cc->max ? DWARF_CB_ABORT : DWARF_CB_OK;
              },
              c);
          return DWARF_CB_OK;
        },
        &ctx);
  }
  if (dwfl) dwfl_end(dwfl);
  return out;
}

// Symbolized like samples: entry 0 is the faulting ip, the rest are
// return addresses.
nlohmann::json SymbolizedFrames(const std::vector<uint64_t>& ips, pid_t pid,
                                const attribution::ProcessTable& table,
                                const attribution::CookieTable& cookies,
                                attribution::Symbolizer& symbolizer) {
  recorder::Sample s;
  s.pid = static_cast<uint32_t>(pid);
  s.mode = recorder::CpuMode::kUser;
  s.user_chain = ips;
  if (!ips.empty()) s.ip = ips[0];
  attribution::AttributedSample attr = attribution::Attribute(s, table, cookies, nullptr, nullptr);
  nlohmann::json frames = nlohmann::json::array();
  for (size_t k = 0; k < attr.frames.size(); ++k) {
    for (const auto& sym : symbolizer.ResolveInline(attr.frames[k])) {
      nlohmann::json f = {{"ip", k < ips.size() ? ips[k] : 0},
                          {"function", sym.function},
                          {"dso", sym.dso},
                          {"offset", sym.offset},
                          {"status", sym.status}};
      if (!sym.file.empty()) {
        f["file"] = sym.file;
        f["line"] = sym.line;
      }
      if (sym.inlined) f["inlined"] = true;
      frames.push_back(std::move(f));
    }
  }
  return frames;
}

// libunwind's walks of every thread of the core, from its coredump
// accessors: a DWARF walk and a frame-pointer walk from the same registers.
struct LibunwindThread {
  pid_t ns_tid = 0;  // the thread's id in the process's pid namespace
  std::vector<uint64_t> ips, fp_ips;
};

std::vector<LibunwindThread> LibunwindWalk(UCD_info* ui, size_t max_frames) {
  std::vector<LibunwindThread> out;
  unw_addr_space_t as = unw_create_addr_space(&_UCD_accessors, 0);
  int n = _UCD_get_num_threads(ui);
  for (int i = 0; i < n; ++i) {
    _UCD_select_thread(ui, i);
    LibunwindThread& t = out.emplace_back();
    t.ns_tid = _UCD_get_pid(ui);
    unw_cursor_t c;
    if (unw_init_remote(&c, as, ui) != 0) continue;
    // Frame-pointer walk from the same registers, over the core's stack
    // memory: where libunwind lacks unwind tables (code segments are not
    // in the core and only offset-0 mappings can back them), frame
    // pointers may still give the callers.
    unw_word_t ip0 = 0, bp = 0;
    unw_get_reg(&c, UNW_REG_IP, &ip0);
    unw_get_reg(&c, UNW_X86_64_RBP, &bp);
    if (ip0) t.fp_ips.push_back(ip0);
    for (size_t k = 0; k < max_frames && bp != 0 && bp % 8 == 0; ++k) {
      unw_word_t next = 0, ret = 0;
      if (_UCD_access_mem(as, bp, &next, 0, ui) != 0 ||
          _UCD_access_mem(as, bp + 8, &ret, 0, ui) != 0 || ret == 0) {
        break;
      }
      t.fp_ips.push_back(ret);
      if (next <= bp) break;  // the stack grows down: callers' frames are above
      bp = next;
    }
    do {
      unw_word_t ip = 0;
      if (unw_get_reg(&c, UNW_REG_IP, &ip) != 0 || ip == 0) break;
      t.ips.push_back(ip);
    } while (t.ips.size() < max_frames && unw_step(&c) > 0);
  }
  unw_destroy_addr_space(as);
  return out;
}

}  // namespace

nlohmann::json Backtrace(const std::string& core_path, const std::string& maps, pid_t pid,
                         pid_t crashing_tid, const std::map<pid_t, pid_t>& global_tids,
                         size_t max_frames) {
  nlohmann::json out = {{"threads", nlohmann::json::array()}};
  // libunwind reads the notes without bounds checks (core_notes.h): only
  // notes a kernel could have written are given to it.
  const Status notes = CheckNotesForLibunwind(core_path);
  UCD_info* ui = nullptr;
  if (notes.ok()) {
    ui = _UCD_create(core_path.c_str());
    if (ui == nullptr) {
      out["error"] = "not a core file libunwind can read";
      return out;
    }
  } else {
    out["note"] = "libunwind's walk skipped: " + notes.message();
  }
  // Read-only file mappings are not in the core: libunwind reads code and
  // unwind tables from the files themselves.
  std::vector<recorder::MmapEvent> mmaps =
      attribution::MapsEvents(static_cast<uint32_t>(pid), maps, 0);
  for (const auto& m : mmaps) {
    if (ui != nullptr && !m.filename.empty() && m.filename[0] == '/' && m.pgoff == 0) {
      _UCD_add_backing_file_at_vaddr(ui, m.start, m.filename.c_str());
    }
  }
  attribution::CookieTable cookies;
  attribution::ProcessTable table(&cookies);
  for (const auto& m : mmaps) table.Apply(recorder::Event(m));
  attribution::KernelSymbols none;
  attribution::Symbolizer symbolizer(&cookies, &none);
  auto dwfl_threads = DwflWalk(core_path, max_frames);
  std::vector<LibunwindThread> walked;
  if (ui != nullptr) {
    walked = LibunwindWalk(ui, max_frames);
  } else {
    for (const auto& [dtid, dips] : dwfl_threads) walked.push_back({dtid, {}, {}});
  }
  // Keep the walk whose frames all land in mapped files: a DWARF step
  // without tables can wander into the stack, a frame-pointer walk stops
  // at code built without them.
  auto mapped = [&](const std::vector<uint64_t>& v) {
    size_t n = 0;
    for (size_t k = 0; k < v.size(); ++k) {
      if (table.Lookup(static_cast<uint32_t>(pid), k ? v[k] - 1 : v[k]) == nullptr) break;
      ++n;
    }
    return n;
  };
  std::vector<nlohmann::json> threads;
  for (size_t i = 0; i < walked.size(); ++i) {
    const pid_t ns_tid = walked[i].ns_tid;
    std::vector<uint64_t> ips = walked[i].ips;
    std::string method = "libunwind";
    if (mapped(walked[i].fp_ips) > mapped(ips)) {
      ips = walked[i].fp_ips;
      method = "frame-pointer";
    }
    for (const auto& [dtid, dips] : dwfl_threads) {
      if (dtid != ns_tid) continue;
      if (ui == nullptr || mapped(dips) > mapped(ips)) {
        ips = dips;
        method = "libdwfl";
      }
      break;
    }
    nlohmann::json t;
    t["index"] = i;
    // The core's tid is the thread's id in the process's pid namespace.
    auto g = global_tids.find(ns_tid);
    t["ns_tid"] = ns_tid;
    t["tid"] = g != global_tids.end() ? g->second : ns_tid;
    t["unwind"] = method;
    t["frames"] = SymbolizedFrames(ips, pid, table, cookies, symbolizer);
    threads.push_back(std::move(t));
  }
  // The core's first thread is the one that took the signal (the kernel
  // writes it first); keep it first, then the others in the core's order,
  // and make sure of it by %I when the core names that thread.
  std::stable_partition(threads.begin(), threads.end(),
                        [&](const nlohmann::json& t) { return t.value("tid", 0) == crashing_tid; });
  for (auto& t : threads) out["threads"].push_back(std::move(t));
  out["crashing_tid"] = crashing_tid;  // global (%I), like each thread's "tid"
  if (ui != nullptr) {
    out["signal"] = _UCD_get_cursig(ui);
    _UCD_destroy(ui);
  }
  return out;
}

}  // namespace flightrec::coredump
