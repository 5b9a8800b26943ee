// The one attribution pipeline (docs/ARCHITECTURE.md, seed 000's dcookies):
//
//   events ──▶ ProcessTable ──▶ ip → (file cookie, file offset) ──▶ Symbolizer
//
// Attributor consumes an event stream in time order — live from a backend or
// replayed from a stored record, through the same code — and turns every
// sample's instruction pointers into (cookie, offset) pairs using the
// mappings known at the sample's time. A cookie names a file by identity
// (build-id, path, device/inode), so a record stays meaningful after the
// process, its libraries or the binary on disk are gone or replaced. Symbols
// are looked up later, at query time, from (build-id, offset).
//
// Thread: an Attributor and a Symbolizer are used by one thread each.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "recorder/model/events.h"

namespace flightrec::recorder::attribution {

// Identity of a mapped file.
struct Cookie {
  uint32_t id = 0;
  std::string path;
  std::string build_id;  // lowercase hex, "" if unknown
  uint64_t dev = 0;      // makedev(maj, min)
  uint64_t ino = 0;
  nlohmann::json ToJson() const;
};

class CookieTable {
 public:
  // Returns the cookie for this mapping's file, creating it if new.
  uint32_t Intern(const MmapEvent& m);
  const Cookie* Get(uint32_t id) const;
  const std::vector<Cookie>& all() const { return cookies_; }
  nlohmann::json ToJson() const;
  static StatusOr<CookieTable> FromJson(const nlohmann::json& j);

 private:
  std::vector<Cookie> cookies_;  // id = index + 1
  std::map<std::string, uint32_t> by_key_;
};

// Reads the GNU build-id note of an ELF file ("" if none or not ELF).
std::string ReadBuildId(const std::string& path);
std::string HexBuildId(const std::string& raw);

struct Mapping {
  uint64_t start = 0;
  uint64_t end = 0;
  uint64_t pgoff = 0;
  uint32_t cookie = 0;  // 0 = anonymous / special ([heap], [stack], //anon)
  bool exec = false;
  std::string name;  // for special mappings like [vdso]
};

// A thread other than the main one: its own name (pthread_setname_np,
// PR_SET_NAME) is what its samples show, not the process's.
struct Thread {
  std::string comm;
  bool exited = false;
  uint64_t exit_time_ns = 0;
};

struct Process {
  uint32_t pid = 0;
  std::string comm;                    // the main thread's (tid == pid) name
  std::map<uint32_t, Thread> threads;  // by tid, the other threads
  std::string exe;                     // path of the first executable mapping after exec
  bool exited = false;
  uint64_t exit_time_ns = 0;
  std::map<uint64_t, Mapping> maps;  // by start address
};

// Applies sideband events. perf never reports munmap, so a mapping lives
// until an overlapping mmap replaces it, an exec clears the address space, or
// the process exits — exited processes stay until Prune, so samples inside
// the history window still attribute (the dlopen/dlclose/exit case).
class ProcessTable {
 public:
  explicit ProcessTable(CookieTable* cookies) : cookies_(cookies) {}
  const CookieTable& cookies() const { return *cookies_; }
  void Apply(const Event& e);
  const Process* Find(uint32_t pid) const;
  // The name thread tid of process pid has now (comm events are applied in
  // time order, so a thread renamed later keeps its old name for the samples
  // before): its own, else the process's, else "".
  const std::string& ThreadComm(uint32_t pid, uint32_t tid) const;
  // Mapping containing ip in pid's address space, or nullptr.
  const Mapping* Lookup(uint32_t pid, uint64_t ip) const;
  // Drops processes (and threads) that exited before cutoff_ns.
  void Prune(uint64_t cutoff_ns);
  size_t size() const { return procs_.size(); }
  // Re-creates the events that rebuild pid's current state (for records):
  // its exec, its mappings, then each live thread's name.
  std::vector<Event> StateEvents(uint32_t pid, uint64_t time_ns) const;

 private:
  Process& Get(uint32_t pid);
  CookieTable* cookies_;
  std::unordered_map<uint32_t, Process> procs_;
  std::unordered_map<uint32_t, uint32_t> tid_to_pid_;
  std::unordered_map<uint32_t, std::vector<MmapEvent>> mmaps_;  // per pid, for StateEvents
};

// The sideband of the history window, so a record can replay mapping changes
// at the instant they happened: a process that execs, dlcloses or remaps
// inside the window has its earlier samples attributed with its earlier
// mappings. Holds a ProcessTable as of a base time plus every sideband event
// since, in arrival order (the order the backend vouches for: the module
// backend moves an exec before its image's mappings although the exec's
// timestamp is later).
//
// Thread: the daemon's loop thread (or `recorder record`'s only thread).
class SidebandHistory {
 public:
  explicit SidebandHistory(CookieTable* cookies) : base_(cookies) {}
  // Appends a sideband event (samples are not sideband and are ignored).
  void Add(const Event& e);
  // Applies the events older than cutoff_ns to the base table and forgets
  // them; drops processes that exited before cutoff_ns. Also trims when more
  // than max_events are held (a storm of mmaps), counting what it moved early.
  void Trim(uint64_t cutoff_ns, size_t max_events = 1'000'000);
  // What a record of samples of `pids` in [start_ns, end_ns] needs, in stream
  // order: events rebuilding each process's state just before start_ns (and
  // that of the parents they fork from inside the window), then each of their
  // sideband events up to end_ns. Times are made non-decreasing (each event
  // takes the minimum of its own and every later event's time), so merging
  // with samples by time keeps the arrival order.
  std::vector<Event> EventsFor(const std::vector<uint32_t>& pids, uint64_t start_ns,
                               uint64_t end_ns) const;
  // The table at the base time; new processes found by a /proc scan go here.
  ProcessTable& base() { return base_; }
  const ProcessTable& base() const { return base_; }
  size_t held() const { return log_.size(); }
  uint64_t trimmed_early() const { return trimmed_early_; }

 private:
  ProcessTable base_;
  std::deque<Event> log_;
  uint64_t trimmed_early_ = 0;
};

// The pid whose attribution a sideband event can change (mmap, exec, comm,
// fork child), or nullopt (exit, loss): replay keeps cached stacks of every
// other process.
std::optional<uint32_t> AffectedPid(const Event& e);

// Events describing the processes that exist now, read from /proc (a scan at
// start fills the table for processes that started before the daemon).
// Tolerates processes vanishing mid-scan.
std::vector<Event> ScanProc(uint64_t time_ns);
// The executable mappings in a /proc/PID/maps text, as mmap events.
std::vector<MmapEvent> MapsEvents(uint32_t pid, const std::string& maps, uint64_t time_ns);

// What a kernel address is: a symbol of the kernel or of a module, or a
// module's code without a symbol.
struct KernelSymbol {
  std::string name;     // "" when only the module is known
  uint64_t offset = 0;  // from the symbol, or from the module's base without one
  std::string module;   // "" for the core kernel
  bool found = false;
};

// Kernel symbols from /proc/kallsyms (with each module symbol's [module]) and
// module extents from /proc/modules, so an address is named only by a symbol
// that can contain it: inside a module, one of that module's symbols (or
// "[module]+0xoff"); past the end of the core kernel's text or of every
// module, nothing — never the nearest symbol below, which would mis-attribute.
class KernelSymbols {
 public:
  static StatusOr<KernelSymbols> Load(const std::string& kallsyms = "/proc/kallsyms",
                                      const std::string& modules = "/proc/modules");
  // kallsyms lines ("addr type name [module]") plus, optionally, lines
  // "module NAME BASE_HEX SIZE" (the form records store) — or /proc/modules
  // text through AddModules.
  static StatusOr<KernelSymbols> FromText(const std::string& text);
  // /proc/modules lines: "name size refcount deps state 0xbase".
  void AddModules(const std::string& proc_modules);
  KernelSymbol Lookup(uint64_t addr) const;
  // "name+0xoff", "name+0xoff [module]", "[module]+0xoff", or "" if unknown.
  std::string Resolve(uint64_t addr) const;
  // The subset of symbols (and module extents) that covers addrs, as text
  // FromText reads (for records).
  std::string Subset(const std::vector<uint64_t>& addrs) const;
  bool empty() const { return syms_.empty() && names_.empty(); }

  // Records given to users hold no kernel address (/proc/kallsyms hides them
  // from users; one defeats KASLR). A kernel frame there is a name reference,
  // (index + 1) << 32 | offset into the symbol, over the record's table of
  // (symbol, module) names (section `kernel_names`, docs/FORMAT.md); 0 is a
  // kernel frame nobody could name. MakeNameRef returns the reference for a
  // looked-up address; FromNames reads a table, after which Lookup answers
  // for references only.
  static constexpr uint64_t kNameRefLimit = 1ull << 24;  // names per record
  static uint64_t NameRef(uint32_t index, uint64_t offset) {
    return (static_cast<uint64_t>(index) + 1) << 32 | offset;
  }
  // JSON: [[name, module], ...] ("" = none); bounded, type-checked.
  static StatusOr<KernelSymbols> FromNames(const std::string& json_text);
  bool names_only() const { return names_only_; }

 private:
  struct Sym {
    uint64_t addr;
    std::string name;
    uint32_t module;  // 0 = core kernel, else index + 1 in modules_
  };
  struct Module {
    std::string name;
    uint64_t base = 0, size = 0;  // size 0: extent unknown
  };
  uint32_t ModuleIndex(const std::string& name);
  const Module* ModuleAt(uint64_t addr) const;
  std::vector<Sym> syms_;
  std::vector<Module> modules_;
  uint64_t core_text_end_ = 0;  // _etext, 0 if unknown
  bool names_only_ = false;
  std::vector<std::pair<std::string, std::string>> names_;  // FromNames: (symbol, module)
};

struct Frame {
  bool kernel = false;
  uint32_t cookie = 0;  // user frames: file cookie (0 = unmapped/anonymous)
  uint64_t offset = 0;  // user: file offset; kernel: address; unmapped: ip
  std::string special;  // "[vdso]", "[anon]", "[unknown]"
};

// Why a sample's user stack is incomplete (empty = complete or not unwound).
struct UnwindNote {
  std::string status;  // "" | ok | truncated | missing_file | no_unwind_info | error
  std::string where;   // the frame/file where unwinding stopped
};

struct AttributedSample {
  uint64_t time_ns = 0;
  uint32_t cpu = 0;
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t period = 0;
  std::string comm;
  std::vector<Frame> frames;  // innermost first: kernel frames, then user frames
  UnwindNote unwind;          // set when the user part came from DWARF unwinding
};

// Unwinds a sample's copied user stack (Sample::user_stack) into user-space
// instruction pointers, innermost first, using the mappings known at the
// sample's time. Implemented by recorder/unwind (libunwind remote API); the
// Attributor calls it when one is set and the sample carries a stack.
class UserUnwinder {
 public:
  virtual ~UserUnwinder() = default;
  virtual std::vector<uint64_t> Unwind(const Sample& s, const ProcessTable& table,
                                       const CookieTable& cookies, UnwindNote* note) = 0;
};

// The one translation of a sample: kernel frames as addresses, user frames
// as (cookie, file offset) through the mappings `table` holds now. The daemon
// calls it on its live table at capture time; Attributor::Add calls it on the
// table rebuilt from a record. no_mapping counts user IPs without a mapping.
AttributedSample Attribute(const Sample& s, const ProcessTable& table, const CookieTable& cookies,
                           UserUnwinder* unwinder, uint64_t* no_mapping);

class Attributor {
 public:
  Attributor() : table_(&cookies_) {}
  // Feed events in time order; samples come back attributed.
  std::optional<AttributedSample> Add(const Event& e);
  const CookieTable& cookies() const { return cookies_; }
  CookieTable& mutable_cookies() { return cookies_; }
  ProcessTable& table() { return table_; }
  uint64_t no_mapping() const { return no_mapping_; }
  // Not owned; nullptr = use the sample's frame-pointer user chain as is.
  void set_unwinder(UserUnwinder* u) { unwinder_ = u; }

 private:
  UserUnwinder* unwinder_ = nullptr;
  CookieTable cookies_;
  ProcessTable table_;
  uint64_t no_mapping_ = 0;
};

// Symbolized frame, for reports.
struct Symbol {
  std::string function;  // demangled; "" if unknown
  std::string dso;       // path or [kernel.kallsyms]
  uint64_t offset = 0;   // file offset (user) or address (kernel)
  std::string status;    // ok | no_symbol | file_changed | file_missing | unmapped
  std::string file;      // source file where DWARF line info exists, else ""
  uint32_t line = 0;     // source line (0 = unknown)
  bool inlined = false;  // an inlined function; the next symbol is its caller
  std::string Display() const;
};

class DwarfFile;  // libdw handle on a file's DWARF (attribution.cc)

// One file's symbols and load segments, as the Symbolizer caches them.
struct FileSyms {
  FileSyms();
  ~FileSyms();
  std::string status = "ok";  // ok | file_changed | file_missing | no_symbol
  std::string debug_file;     // where symbols/DWARF came from if not the file itself
  struct Seg {
    uint64_t offset, vaddr, filesz;
  };
  std::vector<Seg> segs;
  struct Sym {
    uint64_t addr, size;
    std::string name;
  };
  std::vector<Sym> syms;             // sorted by addr
  std::unique_ptr<DwarfFile> dwarf;  // null without DWARF
};

// Looks up (cookie, offset) in the files on disk, verifying build-ids; each
// file is read once and its symbols cached.
//
// Separate debug files are looked for like gdb and elfutils do: by build-id
// under <dir>/.build-id/xx/yyyy.debug for each debug directory, then by the
// file's .gnu_debuglink next to it, in its .debug/ subfolder and under
// <dir>/<its folder>/. A debug file is used only if its build-id matches.
class Symbolizer {
 public:
  // Debug directories: $FLIGHTREC_DEBUGINFO_PATH (colon-separated) or
  // /usr/lib/debug.
  explicit Symbolizer(const CookieTable* cookies, const KernelSymbols* kernel);
  ~Symbolizer();
  // The function containing the frame (never an inlined one).
  Symbol Resolve(const Frame& f);
  // Innermost first: the inlined functions at this address (inlined = true),
  // then the function they were inlined into; with source file:line where the
  // file has DWARF line info.
  std::vector<Symbol> ResolveInline(const Frame& f);
  void set_debug_dirs(std::vector<std::string> dirs) { debug_dirs_ = std::move(dirs); }
  // Source file:line of frames (default on). Off for callers that show only
  // functions: a file's line tables are the costliest part of its DWARF.
  void set_want_lines(bool on) { want_lines_ = on; }
  size_t files_loaded() const { return by_file_.size(); }
  // The vDSO image (recorder/attribution/vdso.h) that names "[vdso]" frames;
  // without one (or with one that is not ELF) they stay "[vdso]+0xoff".
  void set_vdso(const std::string& image);

 private:
  const FileSyms& Load(uint32_t cookie);
  const FileSyms& LoadFile(const std::string& path, const std::string& build_id, uint64_t ino);
  Symbol ResolveIn(const Frame& f, const FileSyms** fs, uint64_t* vaddr);
  std::string FindDebugFile(const std::string& path, const std::string& build_id,
                            const std::string& debuglink) const;
  const CookieTable* cookies_;
  const KernelSymbols* kernel_;
  std::vector<std::string> debug_dirs_;
  bool want_lines_ = true;
  std::unordered_map<uint32_t, const FileSyms*> files_;  // by cookie id
  // By path and build-id: what a file's symbols depend on.
  std::unordered_map<std::string, std::unique_ptr<FileSyms>> by_file_;
  std::string vdso_image_;  // elf_memory reads it in place
  std::unique_ptr<FileSyms> vdso_;
};

}  // namespace flightrec::recorder::attribution
