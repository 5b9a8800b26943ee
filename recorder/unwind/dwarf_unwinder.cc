#include "recorder/unwind/dwarf_unwinder.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <list>
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
    return img;
  }
  void* p = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (p == MAP_FAILED) {
    img->status = "missing_file";
    return img;
  }
  img->map = ScopedMmap(p, static_cast<size_t>(st.st_size));
  Elf64_Ehdr eh;
  std::memcpy(&eh, p, sizeof(eh));
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_machine != EM_X86_64 || eh.e_phentsize != sizeof(Elf64_Phdr) ||
      eh.e_phoff + uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr) > img->map.size()) {
    img->status = "no_unwind_info";
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
    return img;
  }
  img->hdr_vaddr = eh_frame_hdr;
  img->table_vaddr = cur;
  img->fde_count = count;
  return img;
}

// ------------------------------------------------------------- unwinder

// Where one ELF image sits in the address space being unwound.
struct Placed {
  uint64_t lo = 0, hi = 0;  // runtime addresses
  uint64_t bias = 0;        // runtime - link-time address
  const ElfImage* img = nullptr;
};

// One process address space as libunwind sees it: its own register-rule
// cache, valid while the process's mappings keep the same signature.
struct Space {
  Space() = default;
  Space(const Space&) = delete;
  Space& operator=(const Space&) = delete;
  unw_addr_space_t as = nullptr;
  uint64_t signature = 0;
  std::vector<Placed> placed;
  ~Space() {
    if (as != nullptr) unw_destroy_addr_space(as);
  }
};

// The sample being unwound: what the accessors read from.
struct Ctx {
  const Sample* sample = nullptr;
  const ProcessTable* table = nullptr;
  const CookieTable* cookies = nullptr;
  class Unwinder* self = nullptr;
  Space* space = nullptr;
  uint64_t sp = 0;
  int reg_index[UNW_TDEP_LAST_REG + 1];  // libunwind reg -> index in regs, -1
  // Why the walk stopped, set by the accessors.
  std::string status;
  std::string where;
  const Placed* last = nullptr;  // the image of the last lookup, to try first
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
  }

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
    int r = unw_init_remote(&cursor, ctx.space->as, &ctx);
    while (r >= 0 && ips.size() < kMaxFrames) {
      r = unw_step(&cursor);
      if (r <= 0) break;
      unw_word_t next = 0;
      unw_get_reg(&cursor, UNW_REG_IP, &next);
      if (next == 0) {
        r = 0;
        break;
      }
      ips.push_back(next);
    }
    stats_.frames += ips.size();
    if (r == 0) {
      ++stats_.complete;
      note->status = "ok";
      note->where.clear();
      return ips;
    }
    if (ips.size() >= kMaxFrames) {
      Finish(note, "truncated", fmt::format("{} frames (the limit)", kMaxFrames));
      return ips;
    }
    std::string where = ctx.where.empty() ? Describe(ctx, ips.back(), ips.size() == 1) : ctx.where;
    if (ctx.status.empty()) {
      Finish(note, "error",
             fmt::format("{}: {}", where, unw_strerror(static_cast<unw_error_t>(-r))));
    } else {
      Finish(note, ctx.status, where);
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
    if (m->cookie == 0)
      return fmt::format("{}+{:#x}", m->name.empty() ? "[anon]" : m->name, ip - m->start);
    const attribution::Cookie* c = ctx.cookies->Get(m->cookie);
    return fmt::format("{}+{:#x}", c ? c->path : "?", look - m->start + m->pgoff);
  }

  // The process's mappings, hashed: a changed signature (exec, dlopen over a
  // dlclosed library) empties the space's caches.
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
    auto it = spaces_.find(pid);
    if (it != spaces_.end()) {
      Space* sp = &*it->second;
      lru_.splice(lru_.begin(), lru_, it->second);
      if (sp->signature != sig) {
        unw_flush_cache(sp->as, 0, 0);
        sp->placed.clear();
        sp->signature = sig;
      }
      return sp;
    }
    if (lru_.size() >= kMaxSpaces) {
      spaces_.erase(lru_.back().pid);
      lru_.pop_back();
    }
    lru_.emplace_front();
    Entry& e = lru_.front();
    e.pid = pid;
    e.as = unw_create_addr_space(&accessors_, 0);
    // Per address space (one per process): the global cache is this space's
    // own, and the cache holds kCacheEntries register-rule sets.
    unw_set_caching_policy(e.as, UNW_CACHE_GLOBAL);
    unw_set_cache_size(e.as, kCacheEntries, 0);
    e.signature = sig;
    spaces_[pid] = lru_.begin();
    return &e;
  }

  const ElfImage* Image(const attribution::Cookie& c, Ctx* ctx) {
    std::string key = c.path + '\n' + c.build_id;
    auto it = images_.find(key);
    if (it != images_.end()) return it->second.get();
    std::unique_ptr<ElfImage> img;
    std::string bid = attribution::HexBuildId(attribution::ReadBuildId(c.path));
    if (access(c.path.c_str(), R_OK) != 0 || (!c.build_id.empty() && bid != c.build_id)) {
      img = std::make_unique<ElfImage>();
      img->path = c.path;
      img->status = "missing_file";
    } else {
      img = LoadImage(c.path);
    }
    (void)ctx;
    return images_.emplace(key, std::move(img)).first->second.get();
  }

  // The image containing a runtime address of this space, placing it (from
  // the process table's executable mapping) on first use.
  const Placed* Place(Ctx* ctx, uint64_t addr) {
    if (ctx->last && addr >= ctx->last->lo && addr < ctx->last->hi) return ctx->last;
    for (const auto& p : ctx->space->placed) {
      if (addr >= p.lo && addr < p.hi) return ctx->last = &p;
    }
    const Mapping* m = ctx->table->Lookup(ctx->sample->pid, addr);
    if (m == nullptr) {
      ctx->status = "error";
      ctx->where = fmt::format("{:#x}: no mapping", addr);
      return nullptr;
    }
    if (m->cookie == 0) {
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
    const ElfImage* img = Image(*c, ctx);
    uint64_t vaddr = 0;
    if (img->status != "ok" || !img->VaddrOfOffset(m->pgoff, &vaddr)) {
      ctx->status = img->status == "ok" ? "no_unwind_info" : img->status;
      ctx->where = fmt::format("{}+{:#x}", c->path, addr - m->start + m->pgoff);
      return nullptr;
    }
    Placed p;
    p.bias = m->start - vaddr;
    p.lo = img->lo + p.bias;
    p.hi = img->hi + p.bias;
    p.img = img;
    ctx->space->placed.push_back(p);
    ctx->last = nullptr;  // the vector may have moved
    return &ctx->space->placed.back();
  }

  // ---- libunwind accessors (arg = Ctx*)

  static int FindProcInfo(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t* pi,
                          int need_unwind_info, void* arg) {
    Ctx* ctx = static_cast<Ctx*>(arg);
    const Placed* p = ctx->self->Place(ctx, ip);
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
    const Placed* p = nullptr;
    if (ctx->last && addr >= ctx->last->lo && addr < ctx->last->hi) {
      p = ctx->last;
    } else {
      for (const auto& q : ctx->space->placed) {
        if (addr >= q.lo && addr < q.hi) {
          p = ctx->last = &q;
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

  static constexpr size_t kMaxSpaces = 64;
  struct Entry : Space {
    uint32_t pid = 0;
  };
  unw_accessors_t accessors_;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<uint32_t, std::list<Entry>::iterator> spaces_;
  std::unordered_map<std::string, std::unique_ptr<ElfImage>> images_;
  UnwindStats stats_;
};

}  // namespace

std::unique_ptr<DwarfUnwinder> MakeDwarfUnwinder() { return std::make_unique<Unwinder>(); }

}  // namespace flightrec::recorder::unwind
