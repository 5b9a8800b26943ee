#include "recorder/attribution/attribution.h"

#include <cxxabi.h>
#include <dirent.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "common/regular_file.h"
#include "common/scoped_fd.h"
#include "recorder/attribution/plt_symbols.h"
#include "recorder/attribution/vdso.h"

namespace flightrec::recorder::attribution {
namespace {

bool IsSpecial(const std::string& name) {
  return name.empty() || name[0] != '/' || name.rfind("/memfd:", 0) == 0;
}

std::string Demangle(const std::string& name) {
  if (name.rfind("_Z", 0) != 0) return name;
  // A synthesized PLT stub: demangle the function's name (perf shows
  // "std::terminate()@plt").
  static constexpr std::string_view kPlt = "@plt";
  if (name.size() > kPlt.size() && name.ends_with(kPlt)) {
    return Demangle(name.substr(0, name.size() - kPlt.size())) + std::string(kPlt);
  }
  int status = 0;
  char* d = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  if (status != 0 || d == nullptr) return name;
  std::string out(d);
  free(d);
  return out;
}

struct ElfCloser {
  void operator()(Elf* e) const { elf_end(e); }
};
using ElfPtr = std::unique_ptr<Elf, ElfCloser>;

std::string BuildIdOf(Elf* elf) {
  size_t n = 0;
  if (elf_getphdrnum(elf, &n) != 0) return "";
  for (size_t i = 0; i < n; ++i) {
    GElf_Phdr ph;
    if (gelf_getphdr(elf, static_cast<int>(i), &ph) == nullptr || ph.p_type != PT_NOTE) continue;
    Elf_Data* data = elf_getdata_rawchunk(elf, ph.p_offset, ph.p_filesz, ELF_T_NHDR);
    if (data == nullptr) continue;
    size_t off = 0, name_off = 0, desc_off = 0;
    GElf_Nhdr nh;
    while ((off = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0) {
      if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
          std::memcmp(static_cast<char*>(data->d_buf) + name_off, "GNU", 4) == 0) {
        return std::string(static_cast<char*>(data->d_buf) + desc_off, nh.n_descsz);
      }
    }
  }
  return "";
}

}  // namespace

std::string HexBuildId(const std::string& raw) {
  std::string out;
  for (unsigned char c : raw) out += fmt::format("{:02x}", c);
  return out;
}

std::string ReadBuildId(const std::string& path) {
  ScopedFd fd = OpenRegularFile(path);
  if (!fd) return "";
  elf_version(EV_CURRENT);
  ElfPtr elf(elf_begin(fd.get(), ELF_C_READ_MMAP, nullptr));
  if (!elf || elf_kind(elf.get()) != ELF_K_ELF) return "";
  return BuildIdOf(elf.get());
}

std::string VdsoBuildId(const std::string& image) {
  elf_version(EV_CURRENT);
  std::string copy = image;  // elf_memory wants a writable buffer
  ElfPtr elf(elf_memory(copy.data(), copy.size()));
  if (!elf || elf_kind(elf.get()) != ELF_K_ELF) return "";
  return HexBuildId(BuildIdOf(elf.get()));
}

nlohmann::json Cookie::ToJson() const {
  return {{"id", id}, {"path", path}, {"build_id", build_id}, {"dev", dev}, {"ino", ino}};
}

uint32_t CookieTable::Intern(const MmapEvent& m) {
  if (IsSpecial(m.filename)) return 0;
  std::string bid = HexBuildId(m.build_id);
  uint64_t dev = makedev(m.maj, m.min);
  std::string key = fmt::format("{}\n{}\n{}\n{}", m.filename, bid, dev, m.ino);
  auto it = by_key_.find(key);
  if (it != by_key_.end()) return it->second;
  Cookie c;
  c.id = static_cast<uint32_t>(cookies_.size() + 1);
  c.path = m.filename;
  c.build_id = bid;
  c.dev = dev;
  c.ino = m.ino;
  cookies_.push_back(c);
  by_key_[key] = c.id;
  return c.id;
}

const Cookie* CookieTable::Get(uint32_t id) const {
  if (id == 0 || id > cookies_.size()) return nullptr;
  return &cookies_[id - 1];
}

nlohmann::json CookieTable::ToJson() const {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& c : cookies_) j.push_back(c.ToJson());
  return j;
}

StatusOr<CookieTable> CookieTable::FromJson(const nlohmann::json& j) {
  CookieTable t;
  try {
    for (const auto& e : j) {
      Cookie c;
      c.id = e.at("id").get<uint32_t>();
      c.path = e.at("path").get<std::string>();
      c.build_id = e.value("build_id", "");
      c.dev = e.value("dev", uint64_t{0});
      c.ino = e.value("ino", uint64_t{0});
      if (c.id != t.cookies_.size() + 1) return Corrupt("cookie table: ids out of sequence");
      t.by_key_[fmt::format("{}\n{}\n{}\n{}", c.path, c.build_id, c.dev, c.ino)] = c.id;
      t.cookies_.push_back(std::move(c));
    }
  } catch (const std::exception& e) {
    return Corrupt(std::string("cookie table: ") + e.what());
  }
  return t;
}

// ------------------------------------------------------------ ProcessTable

Process& ProcessTable::Get(uint32_t pid) {
  auto& p = procs_[pid];
  p.pid = pid;
  return p;
}

const Process* ProcessTable::Find(uint32_t pid) const {
  auto it = procs_.find(pid);
  return it == procs_.end() ? nullptr : &it->second;
}

void ProcessTable::Apply(const Event& e) {
  if (auto* m = std::get_if<MmapEvent>(&e)) {
    if (m->kernel || m->len == 0) return;
    Process& p = Get(m->pid);
    uint64_t start = m->start, end = m->start + m->len;
    // A new mapping shadows whatever it overlaps (as mmap(MAP_FIXED) does):
    // trim or drop the old ones.
    std::vector<Mapping> keep;
    for (auto it = p.maps.begin(); it != p.maps.end();) {
      Mapping& old = it->second;
      if (old.end <= start || old.start >= end) {
        ++it;
        continue;
      }
      if (old.start < start) {
        Mapping left = old;
        left.end = start;
        keep.push_back(left);
      }
      if (old.end > end) {
        Mapping right = old;
        right.pgoff += end - old.start;
        right.start = end;
        keep.push_back(right);
      }
      it = p.maps.erase(it);
    }
    for (auto& k : keep) p.maps[k.start] = k;
    Mapping nm;
    nm.start = start;
    nm.end = end;
    nm.pgoff = m->pgoff;
    nm.cookie = cookies_->Intern(*m);
    // Old-style MMAP records carry no prot: those are executable mappings
    // (perf reports data mmaps only with attr.mmap_data).
    nm.exec = m->prot == 0 || (m->prot & PROT_EXEC) != 0;
    nm.name = m->filename;
    p.maps[start] = nm;
    if (p.exe.empty() && nm.exec && nm.cookie != 0) p.exe = m->filename;
    mmaps_[m->pid].push_back(*m);
    if (mmaps_[m->pid].size() > 65536) {
      // A JIT mapping code forever: keep what is still mapped.
      auto& v = mmaps_[m->pid];
      std::vector<MmapEvent> live;
      for (const auto& ev : v) {
        auto it = p.maps.find(ev.start);
        if (it != p.maps.end() && it->second.end == ev.start + ev.len) live.push_back(ev);
      }
      v.swap(live);
    }
  } else if (auto* c = std::get_if<CommEvent>(&e)) {
    Process& p = Get(c->pid);
    if (c->exec) {
      p.maps.clear();
      p.exe.clear();
      mmaps_[c->pid].clear();
      p.exited = false;
    }
    if (c->exec) p.threads.clear();  // exec leaves one thread, the new main one
    if (c->pid == c->tid || p.comm.empty()) p.comm = c->comm;
    if (c->pid != c->tid) {
      Thread& t = p.threads[c->tid];
      t.comm = c->comm;
      t.exited = false;
    }
    tid_to_pid_[c->tid] = c->pid;
  } else if (auto* t = std::get_if<TaskEvent>(&e)) {
    if (!t->exit) {
      tid_to_pid_[t->tid] = t->pid;
      // A new task is named as the thread that created it was (copy_process
      // copies comm).
      if (t->pid != t->ppid && t->pid == t->tid) {
        // fork: the child starts with a copy of the parent's address space.
        // (A pointer, not an iterator: Get may rehash.)
        auto pit = procs_.find(t->ppid);
        const Process* parent = pit == procs_.end() ? nullptr : &pit->second;
        std::string comm = ThreadComm(t->ppid, t->ptid);
        Process& child = Get(t->pid);
        child.exited = false;
        child.threads.clear();
        if (parent != nullptr) {
          child.maps = parent->maps;
          child.comm = std::move(comm);
          child.exe = parent->exe;
          mmaps_[t->pid] = mmaps_[t->ppid];
        }
      } else if (t->pid != t->tid && procs_.count(t->pid)) {
        // A new thread (clone with CLONE_THREAD).
        std::string comm = ThreadComm(t->pid, t->ptid);
        Thread& th = Get(t->pid).threads[t->tid];
        th.comm = std::move(comm);
        th.exited = false;
      }
    } else if (t->pid == t->tid) {
      Process& p = Get(t->pid);
      p.exited = true;
      p.exit_time_ns = t->time_ns;
    } else if (auto pit = procs_.find(t->pid); pit != procs_.end()) {
      // Kept until Prune: samples of its last instants may still come.
      auto th = pit->second.threads.find(t->tid);
      if (th != pit->second.threads.end()) {
        th->second.exited = true;
        th->second.exit_time_ns = t->time_ns;
      }
    }
  }
}

const Mapping* ProcessTable::Lookup(uint32_t pid, uint64_t ip) const {
  auto pit = procs_.find(pid);
  if (pit == procs_.end()) {
    auto tp = tid_to_pid_.find(pid);
    if (tp == tid_to_pid_.end()) return nullptr;
    pit = procs_.find(tp->second);
    if (pit == procs_.end()) return nullptr;
  }
  const auto& maps = pit->second.maps;
  auto it = maps.upper_bound(ip);
  if (it == maps.begin()) return nullptr;
  --it;
  if (ip >= it->second.end) return nullptr;
  return &it->second;
}

const std::string& ProcessTable::ThreadComm(uint32_t pid, uint32_t tid) const {
  static const std::string kNone;
  auto pit = procs_.find(pid);
  if (pit == procs_.end()) return kNone;
  const Process& p = pit->second;
  if (tid != pid && !p.threads.empty()) {
    auto t = p.threads.find(tid);
    if (t != p.threads.end()) return t->second.comm;
  }
  return p.comm;
}

void ProcessTable::Prune(uint64_t cutoff_ns) {
  for (auto it = procs_.begin(); it != procs_.end();) {
    if (it->second.exited && it->second.exit_time_ns < cutoff_ns) {
      mmaps_.erase(it->first);
      it = procs_.erase(it);
      continue;
    }
    auto& threads = it->second.threads;
    for (auto t = threads.begin(); t != threads.end();) {
      if (t->second.exited && t->second.exit_time_ns < cutoff_ns) {
        t = threads.erase(t);
      } else {
        ++t;
      }
    }
    ++it;
  }
}

std::vector<Event> ProcessTable::StateEvents(uint32_t pid, uint64_t time_ns) const {
  std::vector<Event> out;
  auto it = procs_.find(pid);
  if (it == procs_.end()) return out;
  CommEvent c;
  c.time_ns = time_ns;
  c.pid = c.tid = pid;
  c.comm = it->second.comm;
  c.exec = true;  // starts a clean address space on replay
  out.push_back(c);
  auto mit = mmaps_.find(pid);
  if (mit != mmaps_.end()) {
    for (MmapEvent m : mit->second) {
      auto cur = it->second.maps.find(m.start);
      if (cur == it->second.maps.end()) continue;  // since replaced
      m.time_ns = time_ns;
      out.push_back(m);
    }
  }
  for (const auto& [tid, t] : it->second.threads) {
    if (t.exited) continue;
    CommEvent tc;
    tc.time_ns = time_ns;
    tc.pid = pid;
    tc.tid = tid;
    tc.comm = t.comm;
    out.push_back(std::move(tc));
  }
  return out;
}

void SidebandHistory::Add(const Event& e) {
  if (std::holds_alternative<Sample>(e)) return;
  log_.push_back(e);
}

void SidebandHistory::Trim(uint64_t cutoff_ns, size_t max_events) {
  // Stops at the first event not old enough even if later ones are older:
  // arrival order is the order of record, and a moved exec (see the class
  // comment) must not be applied after the mappings that follow it.
  while (!log_.empty() && (EventTime(log_.front()) < cutoff_ns || log_.size() > max_events)) {
    if (EventTime(log_.front()) >= cutoff_ns) ++trimmed_early_;
    base_.Apply(log_.front());
    log_.pop_front();
  }
  base_.Prune(cutoff_ns);
}

std::optional<uint32_t> AffectedPid(const Event& e) {
  if (auto* m = std::get_if<MmapEvent>(&e)) {
    if (m->kernel) return std::nullopt;
    return m->pid;
  }
  if (auto* c = std::get_if<CommEvent>(&e)) return c->pid;
  if (auto* t = std::get_if<TaskEvent>(&e)) {
    // A new process starts with a copy of its parent's mappings; a new
    // thread or an exit changes no mapping.
    if (!t->exit && t->pid == t->tid && t->pid != t->ppid) return t->pid;
  }
  return std::nullopt;
}

std::vector<Event> SidebandHistory::EventsFor(const std::vector<uint32_t>& pids, uint64_t start_ns,
                                              uint64_t end_ns) const {
  // Non-decreasing times in arrival order: the suffix minimum.
  std::vector<uint64_t> t(log_.size());
  uint64_t low = UINT64_MAX;
  for (size_t i = log_.size(); i-- > 0;) {
    low = std::min(low, EventTime(log_[i]));
    t[i] = low;
  }
  const size_t cut =
      static_cast<size_t>(std::lower_bound(t.begin(), t.end(), start_ns) - t.begin());
  const size_t stop = static_cast<size_t>(std::upper_bound(t.begin(), t.end(), end_ns) - t.begin());
  // A process forked inside the window starts from its parent's mappings at
  // the fork: the parent's state and events are needed too, transitively.
  std::set<uint32_t> want(pids.begin(), pids.end());
  for (bool grew = true; grew;) {
    grew = false;
    for (size_t i = cut; i < stop; ++i) {
      auto* f = std::get_if<TaskEvent>(&log_[i]);
      if (f && AffectedPid(log_[i]) && want.count(f->pid) && want.insert(f->ppid).second) {
        grew = true;
      }
    }
  }
  ProcessTable state = base_;
  for (size_t i = 0; i < cut; ++i) state.Apply(log_[i]);
  std::vector<Event> out;
  const uint64_t before = start_ns ? start_ns - 1 : 0;
  for (uint32_t pid : want) {
    for (Event& e : state.StateEvents(pid, before)) out.push_back(std::move(e));
  }
  for (size_t i = cut; i < stop; ++i) {
    const Event& e = log_[i];
    uint32_t pid = 0;
    if (auto* m = std::get_if<MmapEvent>(&e)) {
      pid = m->pid;
    } else if (auto* c = std::get_if<CommEvent>(&e)) {
      pid = c->pid;
    } else if (auto* k = std::get_if<TaskEvent>(&e)) {
      pid = k->pid;
    } else {
      continue;
    }
    if (!want.count(pid)) continue;
    Event copy = e;
    std::visit([&](auto& v) { v.time_ns = t[i]; }, copy);
    out.push_back(std::move(copy));
  }
  return out;
}

std::vector<MmapEvent> MapsEvents(uint32_t pid, const std::string& maps, uint64_t time_ns) {
  std::vector<MmapEvent> out;
  std::istringstream in(maps);
  std::string line;
  while (std::getline(in, line)) {
    // 55d4c0a00000-55d4c0a02000 r-xp 00002000 08:01 1234 /usr/bin/x
    unsigned long long start, endaddr, pgoff, ino;
    unsigned maj, min;
    char perms[8] = {};
    int consumed = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %x:%x %llu %n", &start, &endaddr, perms,
                    &pgoff, &maj, &min, &ino, &consumed) < 7) {
      continue;
    }
    if (perms[2] != 'x') continue;  // attribution needs executable mappings only
    MmapEvent m;
    m.time_ns = time_ns;
    m.pid = m.tid = pid;
    m.start = start;
    m.len = endaddr - start;
    m.pgoff = pgoff;
    m.maj = maj;
    m.min = min;
    m.ino = ino;
    m.prot = PROT_READ | PROT_EXEC;
    m.filename = consumed > 0 && static_cast<size_t>(consumed) <= line.size()
                     ? line.substr(static_cast<size_t>(consumed))
                     : "";
    if (m.filename.empty()) m.filename = "//anon";
    if (m.filename[0] == '/') m.build_id = ReadBuildId(m.filename);
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<Event> ScanProc(uint64_t time_ns) {
  std::vector<Event> out;
  DIR* d = opendir("/proc");
  if (d == nullptr) return out;
  while (struct dirent* e = readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0') continue;
    std::ifstream comm_in(fmt::format("/proc/{}/comm", pid));
    std::string comm;
    if (!std::getline(comm_in, comm)) continue;  // gone
    CommEvent c;
    c.time_ns = time_ns;
    c.pid = c.tid = static_cast<uint32_t>(pid);
    c.comm = comm;
    c.exec = true;
    out.push_back(c);
    // Threads named apart from the process (pthread_setname_np) before the
    // daemon started.
    if (DIR* td = opendir(fmt::format("/proc/{}/task", pid).c_str())) {
      while (struct dirent* te = readdir(td)) {
        long tid = std::strtol(te->d_name, &end, 10);
        if (end == te->d_name || *end != '\0' || tid == pid) continue;
        std::ifstream tin(fmt::format("/proc/{}/task/{}/comm", pid, tid));
        CommEvent tc;
        if (!std::getline(tin, tc.comm)) continue;  // gone
        tc.time_ns = time_ns;
        tc.pid = static_cast<uint32_t>(pid);
        tc.tid = static_cast<uint32_t>(tid);
        out.push_back(std::move(tc));
      }
      closedir(td);
    }
    std::ifstream maps(fmt::format("/proc/{}/maps", pid));
    std::string text((std::istreambuf_iterator<char>(maps)), std::istreambuf_iterator<char>());
    for (auto& m : MapsEvents(static_cast<uint32_t>(pid), text, time_ns)) out.push_back(m);
  }
  closedir(d);
  return out;
}

// ------------------------------------------------------------ kernel

uint32_t KernelSymbols::ModuleIndex(const std::string& name) {
  for (size_t i = 0; i < modules_.size(); ++i) {
    if (modules_[i].name == name) return static_cast<uint32_t>(i + 1);
  }
  modules_.push_back(Module{name, 0, 0});
  return static_cast<uint32_t>(modules_.size());
}

const KernelSymbols::Module* KernelSymbols::ModuleAt(uint64_t addr) const {
  for (const auto& m : modules_) {
    if (m.size && addr >= m.base && addr - m.base < m.size) return &m;
  }
  return nullptr;
}

StatusOr<KernelSymbols> KernelSymbols::FromText(const std::string& text) {
  KernelSymbols k;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    char name[512], module[128];
    unsigned long long addr = 0, size = 0;
    if (line.rfind("module ", 0) == 0) {
      if (std::sscanf(line.c_str(), "module %127s %llx %llu", module, &addr, &size) == 3) {
        Module& m = k.modules_[k.ModuleIndex(module) - 1];
        m.base = addr;
        m.size = size;
      }
      continue;
    }
    char type = 0;
    int n = std::sscanf(line.c_str(), "%llx %c %511s [%127[^]]]", &addr, &type, name, module);
    if (n < 3) continue;
    if (addr == 0) continue;  // addresses hidden (kptr_restrict)
    if (n == 3 && std::strcmp(name, "_etext") == 0) k.core_text_end_ = addr;
    if (type != 't' && type != 'T' && type != 'w' && type != 'W') continue;
    k.syms_.push_back({addr, name, n == 4 ? k.ModuleIndex(module) : 0});
  }
  std::sort(k.syms_.begin(), k.syms_.end(),
            [](const Sym& a, const Sym& b) { return a.addr < b.addr; });
  return k;
}

void KernelSymbols::AddModules(const std::string& proc_modules) {
  std::istringstream in(proc_modules);
  std::string line;
  while (std::getline(in, line)) {
    // name size refcount deps state address [taint]
    char name[128], deps[4096], state[32];
    unsigned long long size = 0, base = 0;
    int refs = 0;
    if (std::sscanf(line.c_str(), "%127s %llu %d %4095s %31s %llx", name, &size, &refs, deps, state,
                    &base) != 6 ||
        base == 0) {
      continue;  // malformed, or addresses hidden
    }
    Module& m = modules_[ModuleIndex(name) - 1];
    m.base = base;
    m.size = size;
  }
}

StatusOr<KernelSymbols> KernelSymbols::Load(const std::string& kallsyms,
                                            const std::string& modules) {
  auto slurp = [](const std::string& path) -> StatusOr<std::string> {
    std::ifstream in(path);
    if (!in) return ErrnoStatus(fmt::format("reading {}", path));
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  ASSIGN_OR_RETURN(std::string text, slurp(kallsyms));
  ASSIGN_OR_RETURN(KernelSymbols k, FromText(text));
  // A kernel without module support has no /proc/modules: nothing to add.
  if (auto m = slurp(modules); m.ok()) k.AddModules(*m);
  return k;
}

namespace {

// Whether JSON text nests arrays/objects at most max deep (strings skipped):
// checked before parsing, as parts of nlohmann's DOM recurse per level.
bool NestingAtMost(const std::string& text, int max) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

}  // namespace

StatusOr<KernelSymbols> KernelSymbols::FromNames(const std::string& json_text) {
  // A record is untrusted: depth, counts and lengths are bounded, types checked.
  constexpr size_t kMaxName = 512;
  if (!NestingAtMost(json_text, 2)) {
    return Corrupt("kernel_names: nested deeper than [[name, module], ...]");
  }
  auto j = nlohmann::json::parse(json_text, nullptr, false);
  if (j.is_discarded() || !j.is_array() || j.size() > kNameRefLimit) {
    return Corrupt("kernel_names: not an array of at most 2^24 [name, module] pairs");
  }
  KernelSymbols k;
  k.names_only_ = true;
  k.names_.reserve(j.size());
  for (const auto& e : j) {
    if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_string() ||
        e[0].get_ref<const std::string&>().size() > kMaxName ||
        e[1].get_ref<const std::string&>().size() > kMaxName) {
      return Corrupt("kernel_names: an entry is not a [name, module] pair of short strings");
    }
    k.names_.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
  }
  return k;
}

KernelSymbol KernelSymbols::Lookup(uint64_t addr) const {
  KernelSymbol r;
  if (names_only_) {
    const uint64_t index = addr >> 32;
    if (index == 0 || index > names_.size()) return r;
    const auto& [name, module] = names_[index - 1];
    return KernelSymbol{name, addr & 0xffffffffu, module, true};
  }
  auto it = std::upper_bound(syms_.begin(), syms_.end(), addr,
                             [](uint64_t a, const Sym& s) { return a < s.addr; });
  if (const Module* m = ModuleAt(addr)) {
    const uint32_t mi = static_cast<uint32_t>(m - modules_.data()) + 1;
    // The nearest symbol below that belongs to this module, not below its base.
    for (auto j = it; j != syms_.begin();) {
      --j;
      if (j->addr < m->base) break;
      if (j->module == mi) return KernelSymbol{j->name, addr - j->addr, m->name, true};
    }
    return KernelSymbol{"", addr - m->base, m->name, true};
  }
  if (it == syms_.begin()) return r;
  const Sym& s = *std::prev(it);
  if (s.module == 0 && core_text_end_ && addr >= core_text_end_) {
    return r;  // past the kernel's text and in no known module
  }
  if (s.module != 0 && modules_[s.module - 1].size) {
    return r;  // the module's extent is known, and this address is not in it
  }
  return KernelSymbol{s.name, addr - s.addr, s.module ? modules_[s.module - 1].name : "", true};
}

std::string KernelSymbols::Resolve(uint64_t addr) const {
  KernelSymbol k = Lookup(addr);
  if (!k.found) return "";
  if (k.name.empty()) return fmt::format("[{}]+0x{:x}", k.module, k.offset);
  if (!k.module.empty()) return fmt::format("{}+0x{:x} [{}]", k.name, k.offset, k.module);
  return fmt::format("{}+0x{:x}", k.name, k.offset);
}

std::string KernelSymbols::Subset(const std::vector<uint64_t>& addrs) const {
  std::vector<size_t> idx;
  std::set<uint32_t> mods;
  for (uint64_t a : addrs) {
    if (const Module* m = ModuleAt(a)) mods.insert(static_cast<uint32_t>(m - modules_.data()) + 1);
    auto it = std::upper_bound(syms_.begin(), syms_.end(), a,
                               [](uint64_t x, const Sym& s) { return x < s.addr; });
    if (it == syms_.begin()) continue;
    size_t i = static_cast<size_t>(it - syms_.begin()) - 1;
    idx.push_back(i);
    if (i + 1 < syms_.size()) idx.push_back(i + 1);  // bounds the symbol's extent
  }
  std::sort(idx.begin(), idx.end());
  idx.erase(std::unique(idx.begin(), idx.end()), idx.end());
  std::string out;
  if (core_text_end_) out += fmt::format("{:016x} T _etext\n", core_text_end_);
  for (uint32_t mi : mods) {
    const Module& m = modules_[mi - 1];
    out += fmt::format("module {} {:x} {}\n", m.name, m.base, m.size);
  }
  for (size_t i : idx) {
    const Sym& s = syms_[i];
    if (s.module) {
      out += fmt::format("{:016x} T {}\t[{}]\n", s.addr, s.name, modules_[s.module - 1].name);
    } else {
      out += fmt::format("{:016x} T {}\n", s.addr, s.name);
    }
  }
  return out;
}

// ------------------------------------------------------------ Attributor

std::optional<AttributedSample> Attributor::Add(const Event& e) {
  auto* s = std::get_if<Sample>(&e);
  if (s == nullptr) {
    table_.Apply(e);
    return std::nullopt;
  }
  return Attribute(*s, table_, cookies_, unwinder_, &no_mapping_);
}

AttributedSample Attribute(const Sample& sample, const ProcessTable& table,
                           const CookieTable& cookies, UserUnwinder* unwinder,
                           uint64_t* no_mapping) {
  const Sample* s = &sample;
  AttributedSample a;
  a.time_ns = s->time_ns;
  a.cpu = s->cpu;
  a.pid = s->pid;
  a.tid = s->tid;
  a.period = s->period;
  a.comm = table.ThreadComm(s->pid, s->tid);
  for (uint64_t ip : s->kernel_chain) {
    Frame f;
    f.kernel = true;
    f.offset = ip;
    a.frames.push_back(f);
  }
  if (s->kernel_chain.empty() && s->mode == CpuMode::kKernel) {
    a.frames.push_back(Frame{true, 0, s->ip, ""});
  }
  std::vector<uint64_t> user;
  if (unwinder != nullptr && !s->user_stack.regs.empty()) {
    // DWARF: entry 0 is the interrupted ip, the rest are return addresses,
    // exactly like a frame-pointer chain, so the lookup below applies as is.
    user = unwinder->Unwind(*s, table, cookies, &a.unwind);
  }
  if (user.empty()) user = s->user_chain;
  if (user.empty() && s->mode == CpuMode::kUser) user.push_back(s->ip);
  a.frames.reserve(a.frames.size() + user.size());  // DWARF stacks: 20+ frames, one allocation
  for (size_t i = 0; i < user.size(); ++i) {
    // Return addresses point after the call: look up ip-1 for callers so a
    // call at a function's very end attributes to that function.
    uint64_t ip = user[i];
    uint64_t look = i == 0 ? ip : ip - 1;
    Frame f;
    const Mapping* m = table.Lookup(s->pid, look);
    if (m == nullptr) {
      if (no_mapping) ++*no_mapping;
      f.special = "[unknown]";
      f.offset = ip;
    } else if (m->cookie == 0) {
      f.special = m->name.empty() ? "[anon]" : m->name;
      f.offset = ip - m->start;
    } else {
      f.cookie = m->cookie;
      f.offset = look - m->start + m->pgoff;
    }
    a.frames.push_back(f);
  }
  return a;
}

// ------------------------------------------------------------ Symbolizer

namespace {

// What the symbolizer needs to know about one ELF file.
struct ElfFacts {
  std::string build_id;  // raw bytes
  bool has_symtab = false;
  bool has_debug_info = false;    // a non-empty .debug_info (not NOBITS)
  bool compressed_debug = false;  // zlib/zstd-compressed DWARF (SHF_COMPRESSED, .zdebug)
  std::string debuglink;          // .gnu_debuglink file name, "" if none
  std::vector<PltSymbol> plt;     // the file's PLT stubs (a debug file has none)
};

using SymTuples = std::vector<std::tuple<uint64_t, uint64_t, std::string>>;
using SegTuples = std::vector<std::tuple<uint64_t, uint64_t, uint64_t>>;

bool ReadElfSymbolsFrom(const ElfPtr& elf, SymTuples* out, SegTuples* segs, ElfFacts* facts) {
  if (!elf || elf_kind(elf.get()) != ELF_K_ELF) return false;
  facts->build_id = BuildIdOf(elf.get());
  GElf_Word crc = 0;
  if (const char* link = dwelf_elf_gnu_debuglink(elf.get(), &crc)) facts->debuglink = link;
  if (out != nullptr) facts->plt = SynthesizePltSymbols(elf.get());
  if (segs) {
    size_t n = 0;
    elf_getphdrnum(elf.get(), &n);
    for (size_t i = 0; i < n; ++i) {
      GElf_Phdr ph;
      if (gelf_getphdr(elf.get(), static_cast<int>(i), &ph) && ph.p_type == PT_LOAD) {
        segs->emplace_back(ph.p_offset, ph.p_vaddr, ph.p_filesz);
      }
    }
  }
  size_t shstrndx = 0;
  elf_getshdrstrndx(elf.get(), &shstrndx);
  Elf_Scn* scn = nullptr;
  while ((scn = elf_nextscn(elf.get(), scn)) != nullptr) {
    GElf_Shdr sh;
    if (gelf_getshdr(scn, &sh) == nullptr) continue;
    if (sh.sh_type == SHT_PROGBITS && sh.sh_size > 0) {
      const char* name = elf_strptr(elf.get(), shstrndx, sh.sh_name);
      if (name &&
          (std::strcmp(name, ".debug_info") == 0 || std::strcmp(name, ".zdebug_info") == 0)) {
        facts->has_debug_info = true;
        facts->compressed_debug =
            (sh.sh_flags & SHF_COMPRESSED) != 0 || std::strcmp(name, ".zdebug_info") == 0;
      }
    }
    if (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) continue;
    if (sh.sh_type == SHT_SYMTAB) facts->has_symtab = true;
    if (out == nullptr) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (data == nullptr || sh.sh_entsize == 0) continue;
    size_t count = sh.sh_size / sh.sh_entsize;
    for (size_t i = 0; i < count; ++i) {
      GElf_Sym sym;
      if (gelf_getsym(data, static_cast<int>(i), &sym) == nullptr) continue;
      if (GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_shndx == SHN_UNDEF || sym.st_value == 0) {
        continue;
      }
      const char* name = elf_strptr(elf.get(), sh.sh_link, sym.st_name);
      if (name == nullptr || *name == '\0') continue;
      out->emplace_back(sym.st_value, sym.st_size, name);
    }
  }
  return true;
}

bool ReadElfSymbols(const std::string& path, SymTuples* out, SegTuples* segs, ElfFacts* facts) {
  ScopedFd fd = OpenRegularFile(path);
  if (!fd) return false;
  elf_version(EV_CURRENT);
  ElfPtr elf(elf_begin(fd.get(), ELF_C_READ_MMAP, nullptr));
  return ReadElfSymbolsFrom(elf, out, segs, facts);
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string DirName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// A DIE's name as a demangled, qualified function name where the producer
// recorded a linkage name; DW_AT_abstract_origin/specification are followed.
std::string DieFunctionName(Dwarf_Die* die) {
  Dwarf_Attribute attr;
  const char* name = nullptr;
  if (dwarf_attr_integrate(die, DW_AT_linkage_name, &attr) ||
      dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr)) {
    name = dwarf_formstring(&attr);
  }
  if (name == nullptr && dwarf_attr_integrate(die, DW_AT_name, &attr)) {
    name = dwarf_formstring(&attr);
  }
  return name ? Demangle(name) : "";
}

// Where decompressed copies of debug files are kept:
// $FLIGHTREC_CACHE_DIR, /var/cache/flightrec for root, else
// $XDG_CACHE_HOME/flightrec or ~/.cache/flightrec.
std::string CacheDir() {
  if (const char* d = std::getenv("FLIGHTREC_CACHE_DIR"); d && *d) return d;
  if (geteuid() == 0) return "/var/cache/flightrec";
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/flightrec";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/flightrec";
  return "";
}

// libdw inflates every compressed debug section when it opens a file: for a
// distribution's debug file (libc's: ~0.1 s of zlib) that is paid on every
// query. So a decompressed copy is made once per build-id, with objcopy, into
// the cache directory, and used from then on (mapped, nothing to inflate).
// Any failure falls back to the original file.
std::string DecompressedCopy(const std::string& path) {
  ElfFacts f;
  if (!ReadElfSymbols(path, nullptr, nullptr, &f) || !f.compressed_debug || f.build_id.empty()) {
    return path;
  }
  std::string dir = CacheDir();
  if (dir.empty()) return path;
  std::string hex = HexBuildId(f.build_id);
  std::string cached = fmt::format("{}/debug/{}.debug", dir, hex);
  ElfFacts cf;
  if (ReadElfSymbols(cached, nullptr, nullptr, &cf) && cf.build_id == f.build_id &&
      !cf.compressed_debug) {
    return cached;
  }
  for (const std::string& d : {dir, dir + "/debug"}) {
    if (mkdir(d.c_str(), 0700) != 0 && errno != EEXIST) return path;
  }
  std::string tmp = fmt::format("{}.tmp-{}", cached, getpid());
  pid_t pid = fork();
  if (pid < 0) return path;
  if (pid == 0) {
    int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (devnull >= 0) {
      dup2(devnull, 1);
      dup2(devnull, 2);
    }
    execl("/usr/bin/objcopy", "objcopy", "--decompress-debug-sections", path.c_str(), tmp.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || rename(tmp.c_str(), cached.c_str()) != 0) {
    unlink(tmp.c_str());
    return path;
  }
  return cached;
}

}  // namespace

// libdw on one file's DWARF (the file itself or its separate debug file). The
// Dwarf handle keeps the Elf and fd it was opened from.
class DwarfFile {
 public:
  static std::unique_ptr<DwarfFile> Open(const std::string& path) {
    auto d = std::unique_ptr<DwarfFile>(new DwarfFile);
    d->fd_ = OpenRegularFile(path);
    if (!d->fd_) return nullptr;
    elf_version(EV_CURRENT);
    d->elf_.reset(elf_begin(d->fd_.get(), ELF_C_READ_MMAP, nullptr));
    if (!d->elf_) return nullptr;
    d->dwarf_ = dwarf_begin_elf(d->elf_.get(), DWARF_C_READ, nullptr);
    if (d->dwarf_ == nullptr) return nullptr;
    return d;
  }
  ~DwarfFile() {
    if (dwarf_) dwarf_end(dwarf_);
  }

  // Appends the inline chain at link-time address vaddr, innermost first;
  // the last entry is the containing (non-inlined) function. Returns false if
  // the address has no DWARF.
  bool Frames(uint64_t vaddr, bool lines, std::vector<Symbol>* out) {
    Dwarf_Die cudie;
    if (dwarf_addrdie(dwarf_, vaddr, &cudie) == nullptr) return false;
    std::string file;
    int line = 0;
    Dwarf_Files* files = nullptr;
    size_t nfiles = 0;
    // A CU's line table is its biggest part to read (libdw decodes and sorts
    // all of it on first use): only when file:line is wanted.
    if (lines) {
      if (Dwarf_Line* l = dwarf_getsrc_die(&cudie, vaddr)) {
        if (const char* f = dwarf_linesrc(l, nullptr, nullptr)) file = f;
        dwarf_lineno(l, &line);
      }
      if (dwarf_getsrcfiles(&cudie, &files, &nfiles) != 0) files = nullptr;
    }
    std::vector<Dwarf_Die> scopes = Scopes(&cudie, vaddr);
    const int n = static_cast<int>(scopes.size());
    bool found = false;
    for (int i = 0; i < n; ++i) {
      int tag = dwarf_tag(&scopes[i]);
      Symbol s;
      s.function = DieFunctionName(&scopes[i]);
      s.file = file;
      s.line = line > 0 ? static_cast<uint32_t>(line) : 0;
      s.status = "ok";
      s.inlined = tag == DW_TAG_inlined_subroutine;
      out->push_back(std::move(s));
      found = true;
      if (tag == DW_TAG_subprogram) break;
      // The caller's position is where this body was inlined.
      Dwarf_Attribute attr;
      Dwarf_Word v = 0;
      if (files && dwarf_formudata(dwarf_attr(&scopes[i], DW_AT_call_file, &attr), &v) == 0) {
        const char* f = dwarf_filesrc(files, v, nullptr, nullptr);
        file = f ? f : "";
      }
      if (lines && dwarf_formudata(dwarf_attr(&scopes[i], DW_AT_call_line, &attr), &v) == 0) {
        line = static_cast<int>(v);
      }
    }
    if (found && out->back().inlined) {
      // No subprogram scope (e.g. some GCC clones): the containing function's
      // name comes from the symbol table, its position is the call site.
      Symbol s;
      s.file = file;
      s.line = line > 0 ? static_cast<uint32_t>(line) : 0;
      out->push_back(std::move(s));
    }
    if (!found && !file.empty()) {  // line info but no subprogram DIE
      Symbol s;
      s.file = file;
      s.line = line > 0 ? static_cast<uint32_t>(line) : 0;
      out->push_back(std::move(s));
      found = true;
    }
    return found;
  }

 private:
  DwarfFile() = default;

  struct FuncRange {
    uint64_t lo, hi;
    Dwarf_Die die;
  };

  // The CU's subprograms that have code, by address: read once per CU
  // (dwarf_getfuncs walks it once), where dwarf_getscopes would walk the
  // whole CU again for every address.
  const std::vector<FuncRange>& Funcs(Dwarf_Die* cudie) {
    auto [it, fresh] = funcs_.try_emplace(dwarf_dieoffset(cudie));
    if (fresh) {
      auto add = [](Dwarf_Die* die, void* arg) -> int {
        auto* v = static_cast<std::vector<FuncRange>*>(arg);
        Dwarf_Addr base = 0, lo = 0, hi = 0;
        for (ptrdiff_t off = 0; (off = dwarf_ranges(die, off, &base, &lo, &hi)) > 0;) {
          if (hi > lo) v->push_back({lo, hi, *die});
        }
        return DWARF_CB_OK;
      };
      dwarf_getfuncs(cudie, add, &it->second, 0);
      std::sort(it->second.begin(), it->second.end(),
                [](const FuncRange& a, const FuncRange& b) { return a.lo < b.lo; });
    }
    return it->second;
  }

  // Appends the inlined subroutines under `die` that contain vaddr,
  // outermost first; true if vaddr lies under `die` in a child with addresses.
  static bool Descend(Dwarf_Die* die, uint64_t vaddr, std::vector<Dwarf_Die>* path, int depth) {
    Dwarf_Die child;
    if (depth > 64 || dwarf_child(die, &child) != 0) return false;
    do {
      int tag = dwarf_tag(&child);
      if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_lexical_block) continue;
      bool has_pc = dwarf_hasattr(&child, DW_AT_low_pc) || dwarf_hasattr(&child, DW_AT_ranges);
      if (has_pc) {
        if (dwarf_haspc(&child, vaddr) != 1) continue;
        if (tag == DW_TAG_inlined_subroutine) path->push_back(child);
        Descend(&child, vaddr, path, depth + 1);
        return true;
      }
      // A lexical block without addresses still holds its inlined calls.
      if (tag == DW_TAG_lexical_block && Descend(&child, vaddr, path, depth + 1)) return true;
    } while (dwarf_siblingof(&child, &child) == 0);
    return false;
  }

  // The subprogram containing vaddr and the inlined subroutines inside it
  // that contain vaddr, innermost first — dwarf_getscopes' answer restricted
  // to the tags the caller uses, found by walking only that function's DIEs.
  std::vector<Dwarf_Die> Scopes(Dwarf_Die* cudie, uint64_t vaddr) {
    std::vector<Dwarf_Die> path;
    const auto& funcs = Funcs(cudie);
    auto it = std::upper_bound(funcs.begin(), funcs.end(), vaddr,
                               [](uint64_t a, const FuncRange& f) { return a < f.lo; });
    // Functions' ranges do not overlap, except a nested function (GNU C)
    // inside its parent's: look back past a few that end too early.
    const FuncRange* hit = nullptr;
    for (int back = 0; it != funcs.begin() && back < 8 && hit == nullptr; ++back) {
      --it;
      if (vaddr < it->hi) hit = &*it;
    }
    if (hit == nullptr) return path;
    Dwarf_Die f = hit->die;
    path.push_back(f);
    Descend(&f, vaddr, &path, 0);
    std::reverse(path.begin(), path.end());
    return path;
  }

  ScopedFd fd_;
  ElfPtr elf_;
  Dwarf* dwarf_ = nullptr;
  std::unordered_map<Dwarf_Off, std::vector<FuncRange>> funcs_;  // by CU DIE offset
};

FileSyms::FileSyms() = default;
FileSyms::~FileSyms() = default;

Symbolizer::Symbolizer(const CookieTable* cookies, const KernelSymbols* kernel)
    : cookies_(cookies), kernel_(kernel) {
  const char* env = std::getenv("FLIGHTREC_DEBUGINFO_PATH");
  std::string path = env && *env ? env : "/usr/lib/debug";
  std::stringstream ss(path);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (!dir.empty()) debug_dirs_.push_back(dir);
  }
}

Symbolizer::~Symbolizer() = default;

std::string Symbolizer::FindDebugFile(const std::string& path, const std::string& build_id,
                                      const std::string& debuglink) const {
  auto matches = [&](const std::string& candidate) {
    if (candidate == path || !Exists(candidate)) return false;
    ElfFacts f;
    if (!ReadElfSymbols(candidate, nullptr, nullptr, &f)) return false;
    // Never trust a debug file that belongs to another build.
    return build_id.empty() || HexBuildId(f.build_id) == build_id;
  };
  if (build_id.size() > 2) {
    for (const auto& d : debug_dirs_) {
      std::string c =
          fmt::format("{}/.build-id/{}/{}.debug", d, build_id.substr(0, 2), build_id.substr(2));
      if (matches(c)) return c;
    }
  }
  if (!debuglink.empty() && debuglink.find('/') == std::string::npos) {
    std::string dir = DirName(path);
    std::vector<std::string> cands = {dir + "/" + debuglink, dir + "/.debug/" + debuglink};
    for (const auto& d : debug_dirs_) cands.push_back(d + dir + "/" + debuglink);
    for (const auto& c : cands) {
      if (matches(c)) return c;
    }
  }
  return "";
}

const FileSyms& Symbolizer::Load(uint32_t cookie_id) {
  auto it = files_.find(cookie_id);
  if (it != files_.end()) return *it->second;
  const Cookie* c = cookies_->Get(cookie_id);
  static const FileSyms* const kMissing = [] {
    auto* f = new FileSyms;  // one immortal "unknown cookie" entry
    f->status = "file_missing";
    return f;
  }();
  const FileSyms* fs = c ? &LoadFile(c->path, c->build_id, c->ino) : kMissing;
  files_[cookie_id] = fs;
  return *fs;
}

const FileSyms& Symbolizer::LoadFile(const std::string& path, const std::string& build_id,
                                     uint64_t ino) {
  // Without a build-id, the inode the mapping had is the file's identity.
  std::string key = path + '\n' + (build_id.empty() ? "ino:" + std::to_string(ino) : build_id);
  auto it = by_file_.find(key);
  if (it != by_file_.end()) return *it->second;
  auto fs = std::make_unique<FileSyms>();
  const Cookie cookie{0, path, build_id, 0, 0};
  const Cookie* c = &cookie;
  std::vector<std::tuple<uint64_t, uint64_t, std::string>> syms;
  std::vector<std::tuple<uint64_t, uint64_t, uint64_t>> segs;
  ElfFacts facts;
  if (!ReadElfSymbols(c->path, &syms, &segs, &facts)) {
    fs->status = "file_missing";
  } else if (!c->build_id.empty() && HexBuildId(facts.build_id) != c->build_id) {
    // Never attribute to a different binary's symbols.
    fs->status = "file_changed";
    syms.clear();
  } else if (struct stat st; c->build_id.empty() && ino != 0 &&
                             (stat(c->path.c_str(), &st) != 0 || st.st_ino != ino)) {
    // No build-id to compare: a file replaced since (a rebuild writes a new
    // inode) is another file, whatever its contents.
    fs->status = "file_changed";
    syms.clear();
  } else {
    std::string dwarf_path = facts.has_debug_info ? c->path : "";
    if (!facts.has_symtab || !facts.has_debug_info) {
      // Stripped: a separate debug file has the full symtab and the DWARF.
      std::string dbg = FindDebugFile(c->path, HexBuildId(facts.build_id), facts.debuglink);
      if (!dbg.empty()) {
        std::vector<std::tuple<uint64_t, uint64_t, std::string>> dsyms;
        ElfFacts df;
        if (ReadElfSymbols(dbg, &dsyms, nullptr, &df)) {
          fs->debug_file = dbg;
          if (df.has_symtab && !facts.has_symtab) syms = std::move(dsyms);
          if (df.has_debug_info && dwarf_path.empty()) dwarf_path = dbg;
        }
      }
    }
    if (!dwarf_path.empty()) fs->dwarf = DwarfFile::Open(DecompressedCopy(dwarf_path));
    // Always from the file itself: a debug file's .plt is NOBITS.
    for (auto& p : facts.plt) syms.emplace_back(p.addr, p.size, std::move(p.name));
  }
  for (auto& [off, vaddr, sz] : segs) fs->segs.push_back({off, vaddr, sz});
  // Names stay mangled here: a file has thousands of symbols, a replay hits a
  // few; ResolveIn demangles the ones it returns.
  for (auto& [addr, size, name] : syms) fs->syms.push_back({addr, size, std::move(name)});
  std::sort(fs->syms.begin(), fs->syms.end(),
            [](const FileSyms::Sym& a, const FileSyms::Sym& b) { return a.addr < b.addr; });
  auto& ref = *fs;
  by_file_[key] = std::move(fs);
  return ref;
}

void Symbolizer::set_vdso(const std::string& image) {
  vdso_.reset();
  vdso_image_ = image;
  if (image.empty() || image.size() > kMaxVdsoBytes) return;
  elf_version(EV_CURRENT);
  ElfPtr elf(elf_memory(vdso_image_.data(), vdso_image_.size()));
  SymTuples syms;
  SegTuples segs;
  ElfFacts facts;
  if (!ReadElfSymbolsFrom(elf, &syms, &segs, &facts)) return;  // not ELF: left unnamed
  auto fs = std::make_unique<FileSyms>();
  for (auto& [off, vaddr, sz] : segs) fs->segs.push_back({off, vaddr, sz});
  for (auto& [addr, size, name] : syms) fs->syms.push_back({addr, size, std::move(name)});
  // Each entry point has two names (clock_gettime, a weak alias, and
  // __vdso_clock_gettime): the lookup takes the last of equal addresses, so
  // the __vdso_ one, which is what perf shows.
  auto vdso_name = [](const FileSyms::Sym& x) { return x.name.rfind("__vdso_", 0) == 0; };
  std::sort(fs->syms.begin(), fs->syms.end(), [&](const FileSyms::Sym& a, const FileSyms::Sym& b) {
    if (a.addr != b.addr) return a.addr < b.addr;
    if (vdso_name(a) != vdso_name(b)) return !vdso_name(a);
    return a.name < b.name;
  });
  vdso_ = std::move(fs);
}

std::string Symbol::Display() const {
  if (!function.empty()) return function;
  if (status == "file_changed") return fmt::format("{}+0x{:x} (file changed)", dso, offset);
  return fmt::format("{}+0x{:x}", dso, offset);
}

Symbol Symbolizer::Resolve(const Frame& f) {
  const FileSyms* fs = nullptr;
  uint64_t vaddr = 0;
  return ResolveIn(f, &fs, &vaddr);
}

std::vector<Symbol> Symbolizer::ResolveInline(const Frame& f) {
  const FileSyms* fs = nullptr;
  uint64_t vaddr = 0;
  Symbol outer = ResolveIn(f, &fs, &vaddr);
  std::vector<Symbol> chain;
  if (fs == nullptr || fs->dwarf == nullptr || !fs->dwarf->Frames(vaddr, want_lines_, &chain)) {
    return {std::move(outer)};
  }
  for (auto& s : chain) {
    s.dso = outer.dso;
    s.offset = outer.offset;
  }
  // The outermost entry is the containing function: keep the symbol table's
  // name (what every other tool shows) and add DWARF's file:line to it.
  Symbol& last = chain.back();
  if (!last.inlined) {
    if (!outer.function.empty() || last.function.empty()) {
      last.function = outer.function;
      last.status = outer.status;
    }
  } else {
    outer.file = last.file;
    outer.line = last.line;
    chain.push_back(std::move(outer));
  }
  return chain;
}

Symbol Symbolizer::ResolveIn(const Frame& f, const FileSyms** fs_out, uint64_t* vaddr_out) {
  Symbol s;
  s.offset = f.offset;
  if (f.kernel) {
    KernelSymbol k = kernel_ ? kernel_->Lookup(f.offset) : KernelSymbol{};
    s.dso = k.module.empty() ? "[kernel.kallsyms]" : "[" + k.module + "]";
    s.status = k.name.empty() ? "no_symbol" : "ok";
    s.function = k.name;
    // A module's code without a symbol: "[module]+0xoff" from its base. A
    // record without kernel addresses has only the offset into the symbol.
    if ((k.name.empty() && !k.module.empty()) || (kernel_ && kernel_->names_only())) {
      s.offset = k.offset;
    }
    return s;
  }
  const FileSyms* loaded = nullptr;
  if (f.cookie == 0) {
    s.dso = f.special;
    s.status = "unmapped";
    // The vDSO's offset is from its mapping's start, which is its file
    // offset: the image is mapped whole, from offset 0.
    if (f.special != "[vdso]" || vdso_ == nullptr) return s;
    loaded = vdso_.get();
  } else {
    const Cookie* c = cookies_->Get(f.cookie);
    s.dso = c ? c->path : "?";
    loaded = &Load(f.cookie);
  }
  const FileSyms& fs = *loaded;
  s.status = fs.status;
  if (fs.status != "ok") return s;
  // File offset → link-time address through the PT_LOAD that holds it.
  uint64_t vaddr = 0;
  bool found = false;
  for (const auto& seg : fs.segs) {
    if (f.offset >= seg.offset && f.offset < seg.offset + seg.filesz) {
      vaddr = f.offset - seg.offset + seg.vaddr;
      found = true;
      break;
    }
  }
  if (!found) {
    s.status = "no_symbol";
    return s;
  }
  *fs_out = &fs;
  *vaddr_out = vaddr;
  auto it = std::upper_bound(fs.syms.begin(), fs.syms.end(), vaddr,
                             [](uint64_t a, const FileSyms::Sym& x) { return a < x.addr; });
  if (it == fs.syms.begin()) {
    s.status = "no_symbol";
    return s;
  }
  --it;
  if (it->size != 0 && vaddr >= it->addr + it->size) {
    s.status = "no_symbol";
    return s;
  }
  s.function = Demangle(it->name);
  return s;
}

}  // namespace flightrec::recorder::attribution
