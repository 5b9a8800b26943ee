#include "recorder/unwind/dwarf_unwinder.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#define UNW_REMOTE_ONLY
#include <libunwind.h>

#include <fmt/format.h>

#include "common/scoped_fd.h"
#include "recorder/perf/record_parser.h"

// Not in libunwind's public headers, but exported by libunwind-x86_64 and
// used the same way by perf (tools/perf/util/unwind-libunwind-local.c): the
// binary search over an .eh_frame_hdr table read through the accessors.
extern "C" int _Ux86_64_dwarf_search_unwind_table(unw_addr_space_t as, unw_word_t ip,
                                                  unw_dyn_info_t* di, unw_proc_info_t* pi,
                                                  int need_unwind_info, void* arg);

namespace flightrec::recorder::unwind {
namespace {

using attribution::CookieTable;
using attribution::Mapping;
using attribution::ProcessTable;
using attribution::UnwindNote;

// ------------------------------------------------------------- ELF images

// DWARF exception-header pointer encodings (LSB 4.1, "DWARF Exception Header
// Encoding"; gcc's unwind-pe.h).
constexpr uint8_t kPeOmit = 0xff;
constexpr uint8_t kPeAbsptr = 0x00, kPeUdata2 = 0x02, kPeUdata4 = 0x03, kPeUdata8 = 0x04,
                  kPeSdata2 = 0x0a, kPeSdata4 = 0x0b, kPeSdata8 = 0x0c;
constexpr uint8_t kPePcrel = 0x10, kPeDatarel = 0x30;

// One file's mapping and the facts unwinding needs, read once per file.
struct ElfImage {
  std::string status = "ok";  // ok | missing_file | no_unwind_info
  std::string detail;         // why, when not ok
  std::string path;
  ScopedMmap map;
  struct Seg {
    uint64_t vaddr, memsz, offset, filesz;
  };
  std::vector<Seg> loads;   // PT_LOAD
  uint64_t lo = 0, hi = 0;  // vaddr range of all PT_LOADs
  // .eh_frame_hdr (PT_GNU_EH_FRAME): where its search table starts and how
  // many FDEs it indexes, as link-time addresses.
  uint64_t hdr_vaddr = 0;
  uint64_t table_vaddr = 0;
  uint64_t fde_count = 0;

  const uint8_t* bytes() const { return static_cast<const uint8_t*>(map.data()); }
  // File bytes behind a link-time address, or nullptr (bss, outside).
  const uint8_t* At(uint64_t vaddr, size_t len) const {
    for (const auto& s : loads) {
      if (vaddr >= s.vaddr && vaddr + len <= s.vaddr + s.filesz) {
        uint64_t off = vaddr - s.vaddr + s.offset;
        if (off + len > map.size()) return nullptr;
        return bytes() + off;
      }
    }
    return nullptr;
  }
  // The link-time address of a file offset in a PT_LOAD (page granular, as
  // the kernel maps segments), or false.
  bool VaddrOfOffset(uint64_t offset, uint64_t* vaddr) const {
    const uint64_t page = 4096;
    for (const auto& s : loads) {
      uint64_t off0 = s.offset & ~(page - 1);
      uint64_t v0 = s.vaddr & ~(page - 1);
      if (offset >= off0 && offset < s.offset + s.filesz) {
        *vaddr = v0 + (offset - off0);
        return true;
      }
    }
    return false;
  }
};

bool ReadEncoded(const ElfImage& img, uint64_t* vaddr, uint8_t enc, uint64_t data_base,
                 uint64_t* out) {
  if (enc == kPeOmit) return false;
  uint64_t at = *vaddr;
  uint64_t v = 0;
  size_t len = 0;
  switch (enc & 0x0f) {
    case kPeAbsptr:
    case kPeUdata8:
    case kPeSdata8:
      len = 8;
      break;
    case kPeUdata4:
    case kPeSdata4:
      len = 4;
      break;
    case kPeUdata2:
    case kPeSdata2:
      len = 2;
      break;
    default:
      return false;
  }
  const uint8_t* p = img.At(at, len);
  if (p == nullptr) return false;
  if (len == 8) {
    std::memcpy(&v, p, 8);
  } else if (len == 4) {
    uint32_t u;
    std::memcpy(&u, p, 4);
    v = (enc & 0x0f) == kPeSdata4
            ? static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(u)))
            : u;
  } else {
    uint16_t u;
    std::memcpy(&u, p, 2);
    v = (enc & 0x0f) == kPeSdata2
            ? static_cast<uint64_t>(static_cast<int64_t>(static_cast<int16_t>(u)))
            : u;
  }
  switch (enc & 0x70) {
    case 0:
      break;
    case kPePcrel:
      v += at;
      break;
    case kPeDatarel:
      v += data_base;
      break;
    default:
      return false;
  }
  *vaddr = at + len;
  *out = v;
  return true;
}

// Maps the file and finds its PT_LOADs and .eh_frame_hdr. The caller has
// checked the build-id.
std::unique_ptr<ElfImage> LoadImage(const std::string& path) {
  auto img = std::make_unique<ElfImage>();
  img->path = path;
  ScopedFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st {};
  if (!fd || fstat(fd.get(), &st) != 0 || st.st_size < static_cast<off_t>(sizeof(Elf64_Ehdr))) {
    img->status = "missing_file";
    img->detail = "cannot read";
    return img;
  }
  void* p = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (p == MAP_FAILED) {
    img->status = "missing_file";
    img->detail = "cannot map";
    return img;
  }
  img->map = ScopedMmap(p, static_cast<size_t>(st.st_size));
  Elf64_Ehdr eh;
  std::memcpy(&eh, p, sizeof(eh));
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_machine != EM_X86_64 || eh.e_phentsize != sizeof(Elf64_Phdr) ||
      eh.e_phoff + uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr) > img->map.size()) {
    img->status = "no_unwind_info";
    img->detail = "not an x86-64 ELF file";
    return img;
  }
  uint64_t eh_frame_hdr = 0;
  bool has_hdr = false;
  bool first = true;
  for (int i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    std::memcpy(&ph, img->bytes() + eh.e_phoff + i * sizeof(Elf64_Phdr), sizeof(ph));
    if (ph.p_type == PT_LOAD) {
      img->loads.push_back({ph.p_vaddr, ph.p_memsz, ph.p_offset, ph.p_filesz});
      uint64_t lo = ph.p_vaddr, hi = ph.p_vaddr + ph.p_memsz;
      img->lo = first ? lo : std::min(img->lo, lo);
      img->hi = first ? hi : std::max(img->hi, hi);
      first = false;
    } else if (ph.p_type == PT_GNU_EH_FRAME) {
      eh_frame_hdr = ph.p_vaddr;
      has_hdr = true;
    }
  }
  if (!has_hdr) {
    // Only .debug_frame (or nothing): not searchable through libunwind's
    // remote table lookup. Reported, never guessed.
    img->status = "no_unwind_info";
    img->detail = "no .eh_frame_hdr";
    return img;
  }
  // .eh_frame_hdr: version, eh_frame_ptr_enc, fde_count_enc, table_enc, then
  // eh_frame_ptr, fde_count and the sorted (initial_location, fde) table.
  const uint8_t* h = img->At(eh_frame_hdr, 4);
  uint64_t cur = eh_frame_hdr + 4, eh_frame = 0, count = 0;
  if (h == nullptr || h[0] != 1 || !ReadEncoded(*img, &cur, h[1], eh_frame_hdr, &eh_frame) ||
      !ReadEncoded(*img, &cur, h[2], eh_frame_hdr, &count) || h[3] != (kPeDatarel | kPeSdata4) ||
      count == 0) {
    // libunwind's lookup needs the datarel|sdata4 table every linker writes.
    img->status = "no_unwind_info";
    img->detail = "unusable .eh_frame_hdr";
    return img;
  }
  img->hdr_vaddr = eh_frame_hdr;
  img->table_vaddr = cur;
  img->fde_count = count;
  return img;
}

// ------------------------------------------------------------- unwinder

// The CFI row for [start, end): libunwind's register-state record
// (dwarf_reg_state_t) as unw_reg_states_iterate hands it out, applied to a
// cursor with unw_apply_reg_state.
struct Rule {
  uint64_t end = 0;
  std::unique_ptr<uint64_t[]> data;  // 8-aligned copy of the record
};

// One ELF image at one load bias, with the rules found in it so far. Rules
// are kept per bias, not per file: a rule whose CFA is a DWARF expression
// (PLT entries) holds the runtime address of that expression.
struct Placement {
  const ElfImage* img = nullptr;
  uint64_t bias = 0;                               // runtime - link-time address
  uint64_t lo = 0, hi = 0;                         // runtime range of the image's PT_LOADs
  std::map<uint64_t, Rule> rules;                  // by runtime start address
  std::unordered_map<uint64_t, const Rule*> memo;  // looked-up address -> rule
};

// What one process's address space holds, as far as unwinding has needed
// it; forgotten when the process's mappings change.
struct Space {
  uint64_t signature = 0;
  std::vector<Placement*> placed;
};

class Unwinder;

// The sample being unwound: what the accessors read from.
struct Ctx {
  const Sample* sample = nullptr;
  const ProcessTable* table = nullptr;
  const CookieTable* cookies = nullptr;
  Unwinder* self = nullptr;
  Space* space = nullptr;
  uint64_t sp = 0;
  int reg_index[UNW_TDEP_LAST_REG + 1];  // libunwind reg -> index in regs, -1
  // The address whose CFI is wanted (ip for the leaf, return address - 1
  // for callers, so a call that ends a function finds that function) and
  // where rules found for it go.
  uint64_t lookup = 0;
  Placement* collect = nullptr;
  // Why the walk stopped, set by the accessors.
  std::string status;
  std::string where;
  Placement* last = nullptr;  // the image of the last memory read, tried first
};

// libunwind x86-64 register numbers -> perf_regs.h bits.
int PerfRegOf(int unw_reg) {
  switch (unw_reg) {
    case UNW_X86_64_RAX:
      return perf::kPerfRegAx;
    case UNW_X86_64_RDX:
      return 3;
    case UNW_X86_64_RCX:
      return 2;
    case UNW_X86_64_RBX:
      return perf::kPerfRegBx;
    case UNW_X86_64_RSI:
      return 4;
    case UNW_X86_64_RDI:
      return 5;
    case UNW_X86_64_RBP:
      return perf::kPerfRegBp;
    case UNW_X86_64_RSP:
      return perf::kPerfRegSp;
    case UNW_X86_64_RIP:
      return perf::kPerfRegIp;
    default:
      if (unw_reg >= UNW_X86_64_R8 && unw_reg <= UNW_X86_64_R15) {
        return 16 + (unw_reg - UNW_X86_64_R8);  // PERF_REG_X86_R8..R15
      }
      return -1;
  }
}

// Why libunwind's own stepping (unw_step) is not used: with a register-rule
// cache its every step takes the cache lock with sigprocmask (two syscalls a
// frame, 3/4 of the time of a first version), and without one it parses the
// FDE again for every frame. Instead the rules of a whole FDE are taken once
// with unw_reg_states_iterate, kept per image placement, and applied with
// unw_apply_reg_state — the external-cache API libunwind provides for this.
class Unwinder : public DwarfUnwinder {
 public:
  Unwinder() {
    std::memset(&accessors_, 0, sizeof(accessors_));
    accessors_.find_proc_info = &FindProcInfo;
    accessors_.put_unwind_info = &PutUnwindInfo;
    accessors_.get_dyn_info_list_addr = &GetDynInfoListAddr;
    accessors_.access_mem = &AccessMem;
    accessors_.access_reg = &AccessReg;
    accessors_.access_fpreg = &AccessFpreg;
    accessors_.resume = &Resume;
    accessors_.get_proc_name = &GetProcName;
    as_ = unw_create_addr_space(&accessors_, 0);
    unw_set_caching_policy(as_, UNW_CACHE_NONE);
  }
  ~Unwinder() override {
    if (as_ != nullptr) unw_destroy_addr_space(as_);
  }
  Unwinder(const Unwinder&) = delete;
  Unwinder& operator=(const Unwinder&) = delete;

  const UnwindStats& stats() const override { return stats_; }

  std::vector<uint64_t> Unwind(const Sample& s, const ProcessTable& table,
                               const CookieTable& cookies, UnwindNote* note) override {
    std::vector<uint64_t> ips;
    ++stats_.samples;
    Ctx ctx;
    ctx.sample = &s;
    ctx.table = &table;
    ctx.cookies = &cookies;
    ctx.self = this;
    const UserStack& us = s.user_stack;
    for (int r = 0; r <= UNW_TDEP_LAST_REG; ++r) {
      int bit = PerfRegOf(r);
      ctx.reg_index[r] = -1;
      if (bit >= 0 && (us.regs_mask >> bit) & 1) {
        int idx = __builtin_popcountll(us.regs_mask & ((1ull << bit) - 1));
        if (static_cast<size_t>(idx) < us.regs.size()) ctx.reg_index[r] = idx;
      }
    }
    if (ctx.reg_index[UNW_X86_64_RIP] < 0 || ctx.reg_index[UNW_X86_64_RSP] < 0) {
      Finish(note, "error", "no ip/sp registers in the sample");
      return ips;
    }
    ctx.sp = us.regs[ctx.reg_index[UNW_X86_64_RSP]];
    uint64_t ip = us.regs[ctx.reg_index[UNW_X86_64_RIP]];
    ctx.space = SpaceFor(s.pid, table);
    ips.push_back(ip);

    unw_cursor_t cursor;
    int r = unw_init_remote(&cursor, as_, &ctx);
    if (r < 0) {
      Finish(note, "error", fmt::format("unw_init_remote: {}", unw_strerror(r)));
      return ips;
    }
    bool complete = false;
    while (ips.size() < kMaxFrames) {
      ctx.lookup = ips.size() == 1 ? ip : ip - 1;
      const Rule* rule = FindRule(&ctx, &cursor);
      if (rule == nullptr) break;
      r = unw_apply_reg_state(&cursor, rule->data.get());
      if (r < 0) {
        if (ctx.status.empty()) {
          ctx.status = "error";
          ctx.where = fmt::format("{}: {}", Describe(ctx, ip, ips.size() == 1),
                                  unw_strerror(static_cast<unw_error_t>(-r)));
        }
        break;
      }
      unw_word_t next = 0;
      unw_get_reg(&cursor, UNW_REG_IP, &next);
      // An undefined return address column (r == 0) is the ABI's end of the
      // call chain (_start, clone); so is a null return address.
      if (r == 0 || next == 0) {
        complete = true;
        break;
      }
      ip = next;
      ips.push_back(ip);
    }
    stats_.frames += ips.size();
    if (complete) {
      ++stats_.complete;
      note->status = "ok";
      note->where.clear();
    } else if (ips.size() >= kMaxFrames) {
      Finish(note, "truncated", fmt::format("{} frames (the limit)", kMaxFrames));
    } else {
      Finish(note, ctx.status.empty() ? "error" : ctx.status, ctx.where);
    }
    return ips;
  }

 private:
  void Finish(UnwindNote* note, const std::string& status, std::string where) {
    if (status == "truncated") ++stats_.truncated;
    if (status == "missing_file") ++stats_.missing_file;
    if (status == "no_unwind_info") ++stats_.no_unwind_info;
    if (status == "error") ++stats_.errors;
    note->status = status;
    note->where = std::move(where);
  }

  // "file+0xoffset" of a frame, for notes.
  static std::string Describe(const Ctx& ctx, uint64_t ip, bool leaf) {
    uint64_t look = leaf ? ip : ip - 1;
    const Mapping* m = ctx.table->Lookup(ctx.sample->pid, look);
    if (m == nullptr) return fmt::format("{:#x} (unmapped)", ip);
    if (m->cookie == 0) {
      return fmt::format("{}+{:#x}", m->name.empty() ? "[anon]" : m->name, ip - m->start);
    }
    const attribution::Cookie* c = ctx.cookies->Get(m->cookie);
    return fmt::format("{}+{:#x}", c ? c->path : "?", look - m->start + m->pgoff);
  }

  // The process's mappings, hashed: a changed signature (exec, dlopen over a
  // dlclosed library) makes the space forget where its images were.
  static uint64_t Signature(const ProcessTable& table, uint32_t pid) {
    const attribution::Process* p = table.Find(pid);
    if (p == nullptr) return 0;
    uint64_t h = 0xcbf29ce484222325ull;
    auto mix = [&h](uint64_t v) {
      h ^= v;
      h *= 0x100000001b3ull;
    };
    for (const auto& [start, m] : p->maps) {
      mix(start);
      mix(m.end);
      mix(m.pgoff);
      mix(m.cookie);
    }
    return h;
  }

  Space* SpaceFor(uint32_t pid, const ProcessTable& table) {
    uint64_t sig = Signature(table, pid);
    Space& sp = spaces_[pid];
    if (sp.signature != sig) {
      sp.placed.clear();
      sp.signature = sig;
    }
    return &sp;
  }

  const ElfImage* Image(const attribution::Cookie& c) {
    std::string key = c.path + '\n' + c.build_id;
    auto it = images_.find(key);
    if (it != images_.end()) return it->second.get();
    std::unique_ptr<ElfImage> img;
    bool readable = access(c.path.c_str(), R_OK) == 0;
    if (!readable || (!c.build_id.empty() &&
                      attribution::HexBuildId(attribution::ReadBuildId(c.path)) != c.build_id)) {
      // Gone, or rebuilt since: its CFI would describe other code.
      img = std::make_unique<ElfImage>();
      img->path = c.path;
      img->status = "missing_file";
      img->detail = readable ? "build-id differs" : "not found";
    } else {
      img = LoadImage(c.path);
    }
    return images_.emplace(key, std::move(img)).first->second.get();
  }

  // The placed image containing a runtime address of the sample's process,
  // placing it (from the process table's executable mapping) on first use.
  Placement* Place(Ctx* ctx, uint64_t addr) {
    for (Placement* p : ctx->space->placed) {
      if (addr >= p->lo && addr < p->hi) return p;
    }
    const Mapping* m = ctx->table->Lookup(ctx->sample->pid, addr);
    if (m == nullptr) {
      ctx->status = "error";
      ctx->where = fmt::format("{:#x}: not in any mapping", addr);
      return nullptr;
    }
    if (m->cookie == 0) {
      // [vdso], JIT code, anonymous memory: no file to read CFI from.
      ctx->status = "missing_file";
      ctx->where = fmt::format("{}+{:#x}", m->name.empty() ? "[anon]" : m->name, addr - m->start);
      return nullptr;
    }
    const attribution::Cookie* c = ctx->cookies->Get(m->cookie);
    if (c == nullptr) {
      ctx->status = "error";
      ctx->where = fmt::format("{:#x}: unknown file", addr);
      return nullptr;
    }
    const ElfImage* img = Image(*c);
    uint64_t vaddr = 0;
    if (img->status != "ok" || !img->VaddrOfOffset(m->pgoff, &vaddr)) {
      ctx->status = img->status == "ok" ? "no_unwind_info" : img->status;
      ctx->where = fmt::format("{}+{:#x}", c->path, addr - m->start + m->pgoff);
      if (!img->detail.empty()) ctx->where += " (" + img->detail + ")";
      return nullptr;
    }
    uint64_t bias = m->start - vaddr;
    auto& slot = placements_[{img, bias}];
    if (!slot) {
      slot = std::make_unique<Placement>();
      slot->img = img;
      slot->bias = bias;
      slot->lo = img->lo + bias;
      slot->hi = img->hi + bias;
    }
    ctx->space->placed.push_back(slot.get());
    return slot.get();
  }

  // The rule for ctx->lookup: from the placement's rules, or by reading the
  // FDE that covers it (all of its rows at once).
  const Rule* FindRule(Ctx* ctx, unw_cursor_t* cursor) {
    Placement* p = Place(ctx, ctx->lookup);
    if (p == nullptr) return nullptr;
    if (auto it = p->memo.find(ctx->lookup); it != p->memo.end()) return it->second;
    const Rule* rule = RuleIn(*p, ctx->lookup);
    if (rule == nullptr) {
      ctx->collect = p;
      int r = unw_reg_states_iterate(cursor, &Collect, ctx);
      ctx->collect = nullptr;
      if (r < 0) {
        if (ctx->status.empty()) {
          ctx->status = "error";
          ctx->where = fmt::format("{}+{:#x}: {}", p->img->path, ctx->lookup - p->bias,
                                   unw_strerror(static_cast<unw_error_t>(-r)));
        }
        return nullptr;
      }
      rule = RuleIn(*p, ctx->lookup);
      if (rule == nullptr) {
        ctx->status = "no_unwind_info";
        ctx->where = fmt::format("{}+{:#x} (no CFI row)", p->img->path, ctx->lookup - p->bias);
        return nullptr;
      }
    }
    p->memo.emplace(ctx->lookup, rule);
    return rule;
  }

  static const Rule* RuleIn(const Placement& p, uint64_t addr) {
    auto it = p.rules.upper_bound(addr);
    if (it == p.rules.begin()) return nullptr;
    --it;
    return addr < it->second.end ? &it->second : nullptr;
  }

  static int Collect(void* token, void* data, size_t size, unw_word_t start, unw_word_t end) {
    Ctx* ctx = static_cast<Ctx*>(token);
    Rule rule;
    rule.end = end;
    rule.data.reset(new uint64_t[(size + 7) / 8]);
    std::memcpy(rule.data.get(), data, size);
    ctx->collect->rules.emplace(start, std::move(rule));
    return 0;
  }

  // ---- libunwind accessors (arg = Ctx*)

  static int FindProcInfo(unw_addr_space_t as, unw_word_t, unw_proc_info_t* pi,
                          int need_unwind_info, void* arg) {
    Ctx* ctx = static_cast<Ctx*>(arg);
    // libunwind asks for the cursor's ip; the row wanted is ctx->lookup's.
    unw_word_t ip = ctx->lookup;
    Placement* p = ctx->self->Place(ctx, ip);
    // A hard error, not -UNW_ENOINFO: libunwind would then guess the caller
    // from rbp (Gstep.c), which without frame pointers is a wrong frame.
    if (p == nullptr) return -UNW_EINVAL;
    const ElfImage* img = p->img;
    unw_dyn_info_t di;
    std::memset(&di, 0, sizeof(di));
    di.format = UNW_INFO_FORMAT_REMOTE_TABLE;
    di.start_ip = p->lo;
    di.end_ip = p->hi;
    di.u.rti.segbase = img->hdr_vaddr + p->bias;
    di.u.rti.table_data = img->table_vaddr + p->bias;
    // In words; each entry is two int32 (initial location, FDE address).
    di.u.rti.table_len = img->fde_count * 8 / sizeof(unw_word_t);
    int r = _Ux86_64_dwarf_search_unwind_table(as, ip, &di, pi, need_unwind_info, arg);
    if (r == -UNW_ENOINFO) {
      ctx->status = "no_unwind_info";
      ctx->where = fmt::format("{}+{:#x} (no FDE)", img->path, ip - p->bias);
      return -UNW_EINVAL;
    }
    return r;
  }

  static void PutUnwindInfo(unw_addr_space_t, unw_proc_info_t*, void*) {}

  static int GetDynInfoListAddr(unw_addr_space_t, unw_word_t*, void*) { return -UNW_ENOINFO; }

  static int AccessMem(unw_addr_space_t, unw_word_t addr, unw_word_t* valp, int write, void* arg) {
    if (write) return -UNW_EINVAL;
    Ctx* ctx = static_cast<Ctx*>(arg);
    const std::vector<uint8_t>& stack = ctx->sample->user_stack.stack;
    // The stack copy starts at the sampled sp.
    if (addr >= ctx->sp && addr - ctx->sp + sizeof(unw_word_t) <= stack.size()) {
      std::memcpy(valp, stack.data() + (addr - ctx->sp), sizeof(unw_word_t));
      return 0;
    }
    // Code and unwind tables: from the file behind the image.
    Placement* p = ctx->last;
    if (p == nullptr || addr < p->lo || addr >= p->hi) {
      p = nullptr;
      for (Placement* q : ctx->space->placed) {
        if (addr >= q->lo && addr < q->hi) {
          p = ctx->last = q;
          break;
        }
      }
    }
    if (p != nullptr) {
      if (const uint8_t* b = p->img->At(addr - p->bias, sizeof(unw_word_t))) {
        std::memcpy(valp, b, sizeof(unw_word_t));
        return 0;
      }
    }
    // Above the copy, on the stack: the copy was too short for this frame.
    if (addr >= ctx->sp) {
      ctx->status = "truncated";
      ctx->where = fmt::format("stack copy of {} bytes ends at sp+{:#x}, frame needs sp+{:#x}",
                               stack.size(), stack.size(), addr - ctx->sp);
    } else if (ctx->status.empty()) {
      ctx->status = "error";
      ctx->where = fmt::format("read of {:#x} below the stack pointer", addr);
    }
    return -UNW_EINVAL;
  }

  static int AccessReg(unw_addr_space_t, unw_regnum_t reg, unw_word_t* valp, int write, void* arg) {
    if (write) return -UNW_EREADONLYREG;
    Ctx* ctx = static_cast<Ctx*>(arg);
    if (reg < 0 || reg > UNW_TDEP_LAST_REG || ctx->reg_index[reg] < 0) {
      // A caller-saved register the sample does not carry: no CFI computes a
      // CFA or return address from one, so its value never matters.
      *valp = 0;
      return 0;
    }
    *valp = ctx->sample->user_stack.regs[ctx->reg_index[reg]];
    return 0;
  }

  static int AccessFpreg(unw_addr_space_t, unw_regnum_t, unw_fpreg_t*, int, void*) {
    return -UNW_EINVAL;
  }
  static int Resume(unw_addr_space_t, unw_cursor_t*, void*) { return -UNW_EINVAL; }
  static int GetProcName(unw_addr_space_t, unw_word_t, char*, size_t, unw_word_t*, void*) {
    return -UNW_EINVAL;
  }

  unw_accessors_t accessors_;
  unw_addr_space_t as_ = nullptr;
  std::unordered_map<uint32_t, Space> spaces_;
  std::map<std::pair<const ElfImage*, uint64_t>, std::unique_ptr<Placement>> placements_;
  std::unordered_map<std::string, std::unique_ptr<ElfImage>> images_;
  UnwindStats stats_;
};

}  // namespace

std::unique_ptr<DwarfUnwinder> MakeDwarfUnwinder() { return std::make_unique<Unwinder>(); }

}  // namespace flightrec::recorder::unwind
