#include "recorder/unwind/dwarf_unwinder.h"

#include <asm/perf_regs.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#define UNW_REMOTE_ONLY
#include <libunwind.h>

#include <fmt/format.h>

#include "common/regular_file.h"
#include "common/scoped_fd.h"
#include "recorder/attribution/vdso.h"
#include "recorder/elf/build_id.h"
#include "recorder/unwind/cfi.h"
#include "recorder/unwind/fast_rule.h"

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
using attribution::UnwindCode;
using attribution::UnwindNote;

// The kernel's name of the vDSO's mapping (/proc/PID/maps, perf's MMAP2).
constexpr char kVdsoName[] = "[vdso]";

// ------------------------------------------------------------- unwinder

// The CFI row for [start, end): libunwind's register-state record
// (dwarf_reg_state_t) as unw_reg_states_iterate hands it out, applied to a
// cursor with unw_apply_reg_state.
struct Rule {
  uint64_t end = 0;
  std::unique_ptr<uint64_t[]> data;  // 8-aligned copy of the record
  FastRule fast;
};

// One ELF image at one load bias, with the rules found in it so far. Rules
// are kept per bias, not per file: a rule whose CFA is a DWARF expression
// (PLT entries) holds the runtime address of that expression.
struct Placement {
  const ElfImage* img = nullptr;
  uint64_t bias = 0;               // runtime - link-time address
  uint64_t lo = 0, hi = 0;         // runtime range of the image's PT_LOADs
  std::map<uint64_t, Rule> rules;  // by runtime start address
};

// What one process's address space holds, as far as unwinding has needed
// it; forgotten when the process's mappings change.
struct Space {
  uint64_t signature = 0;
  uint64_t table_generation = 0;  // of the table the signature was taken from
  std::vector<Placement*> placed;
  std::vector<Placement*> overlaid;  // the placed images with built CFI (usually none)
};

class Unwinder;

// The sample being unwound: what the accessors read from.
struct Ctx {
  const Sample* sample = nullptr;
  std::span<const uint8_t> stack;  // the sample's stack copy
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
  // Why the walk stopped, set by the accessors: the status, the detailed
  // where for the sample's note, and a coarse place for the statistics.
  attribution::UnwindStatus status;
  std::string where;
  std::string place;
  Placement* last = nullptr;    // the image of the last memory read, tried first
  Placement* placed = nullptr;  // the image of the last frame, tried first by Place
};

// libunwind x86-64 register numbers -> the bits of perf's sample_regs_user
// (<asm/perf_regs.h>, the order the kernel copies them in; the module backend
// uses the same layout).
int PerfRegOf(int unw_reg) {
  switch (unw_reg) {
    case UNW_X86_64_RAX:
      return PERF_REG_X86_AX;
    case UNW_X86_64_RDX:
      return PERF_REG_X86_DX;
    case UNW_X86_64_RCX:
      return PERF_REG_X86_CX;
    case UNW_X86_64_RBX:
      return PERF_REG_X86_BX;
    case UNW_X86_64_RSI:
      return PERF_REG_X86_SI;
    case UNW_X86_64_RDI:
      return PERF_REG_X86_DI;
    case UNW_X86_64_RBP:
      return PERF_REG_X86_BP;
    case UNW_X86_64_RSP:
      return PERF_REG_X86_SP;
    case UNW_X86_64_RIP:
      return PERF_REG_X86_IP;
    default:
      if (unw_reg >= UNW_X86_64_R8 && unw_reg <= UNW_X86_64_R15) {
        return PERF_REG_X86_R8 + (unw_reg - UNW_X86_64_R8);
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

  void set_vdso(const std::string& image) override {
    // What was placed or learnt from an earlier image is forgotten with it.
    spaces_.clear();
    last_space_ = nullptr;
    std::fill(memo_.begin(), memo_.end(), MemoEntry{});
    std::erase_if(placements_, [this](const auto& p) { return p.first.first == vdso_.get(); });
    vdso_.reset();
    if (image.empty() || image.size() > attribution::kMaxVdsoBytes) return;
    vdso_ = LoadImageFromBytes(kVdsoName, image);
  }

  std::vector<uint64_t> Unwind(const Sample& s, const ProcessTable& table,
                               const CookieTable& cookies, UnwindNote* note) override {
    return UnwindCopy(s, s.user_stack.stack, table, cookies, note);
  }

  std::vector<uint64_t> UnwindCopy(const Sample& s, std::span<const uint8_t> stack,
                                   const ProcessTable& table, const CookieTable& cookies,
                                   UnwindNote* note) override {
    std::vector<uint64_t> ips;
    ips.reserve(64);  // one allocation for most stacks, not one per doubling
    ++stats_.samples;
    Ctx ctx;
    ctx.sample = &s;
    ctx.stack = stack;
    ctx.table = &table;
    ctx.cookies = &cookies;
    ctx.self = this;
    const UserStack& us = s.user_stack;
    // Where each register sits in the sample: the same for every sample of a
    // backend, so computed once per register mask.
    if (us.regs_mask != index_mask_ || !index_valid_) {
      for (int r = 0; r <= UNW_TDEP_LAST_REG; ++r) {
        int bit = PerfRegOf(r);
        index_[r] = -1;
        if (bit >= 0 && (us.regs_mask >> bit) & 1) {
          index_[r] = __builtin_popcountll(us.regs_mask & ((1ull << bit) - 1));
        }
      }
      index_mask_ = us.regs_mask;
      index_valid_ = true;
    }
    for (int r = 0; r <= UNW_TDEP_LAST_REG; ++r) {
      ctx.reg_index[r] =
          index_[r] >= 0 && static_cast<size_t>(index_[r]) < us.regs.size() ? index_[r] : -1;
    }
    if (ctx.reg_index[UNW_X86_64_RIP] < 0 || ctx.reg_index[UNW_X86_64_RSP] < 0) {
      Finish(note, UnwindCode::kError, "no ip/sp registers in the sample", "samples without ip/sp");
      return ips;
    }
    ctx.sp = us.regs[ctx.reg_index[UNW_X86_64_RSP]];
    uint64_t ip = us.regs[ctx.reg_index[UNW_X86_64_RIP]];
    ctx.space = SpaceFor(s.pid, table);
    ips.push_back(ip);
    if (FastWalk(&ctx, ip, &ips)) {
      stats_.frames += ips.size();
      ++stats_.complete;
      ++stats_.fast;
      note->status = UnwindCode::kOk;
      note->where.clear();
      return ips;
    }
    // Through libunwind, from the start, with nothing the fast walk noted.
    ips.resize(1);
    ctx.status = attribution::UnwindStatus();
    ctx.where.clear();
    ctx.place.clear();
    ctx.last = nullptr;

    unw_cursor_t cursor;
    int r = unw_init_remote(&cursor, as_, &ctx);
    if (r < 0) {
      Finish(note, UnwindCode::kError, fmt::format("unw_init_remote: {}", unw_strerror(r)),
             "unw_init_remote");
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
          ctx.status = UnwindCode::kError;
          ctx.where = fmt::format("{}: {}", Describe(ctx, ip, ips.size() == 1),
                                  unw_strerror(static_cast<unw_error_t>(-r)));
          ctx.place = FileOf(ctx, ip, ips.size() == 1);
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
      note->status = UnwindCode::kOk;
      note->where.clear();
    } else if (ips.size() >= kMaxFrames) {
      std::string limit = fmt::format("{} frames (the limit)", kMaxFrames);
      Finish(note, UnwindCode::kTruncated, limit, limit);
    } else {
      Finish(note, ctx.status.empty() ? UnwindCode::kError : ctx.status.value(), ctx.where,
             ctx.place);
    }
    return ips;
  }

 private:
  void Finish(UnwindNote* note, attribution::UnwindStatus status, std::string where,
              const std::string& place) {
    // The counter of each UnwindCode (none for kNone and kOk).
    static constexpr uint64_t UnwindStats::*kCounter[] = {nullptr,
                                                          nullptr,
                                                          &UnwindStats::truncated,
                                                          &UnwindStats::missing_file,
                                                          &UnwindStats::no_unwind_info,
                                                          &UnwindStats::errors};
    if (auto counter = kCounter[static_cast<size_t>(status.value())]) ++(stats_.*counter);
    ++stats_.stops[{std::string(status), place.empty() ? "(unknown)" : place}];
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

  // The file (or special mapping) of a frame, for the statistics.
  static std::string FileOf(const Ctx& ctx, uint64_t ip, bool leaf) {
    const Mapping* m = ctx.table->Lookup(ctx.sample->pid, leaf ? ip : ip - 1);
    if (m == nullptr) return "unmapped addresses";
    if (m->cookie == 0) return m->name.empty() ? "[anon]" : m->name;
    const attribution::Cookie* c = ctx.cookies->Get(m->cookie);
    return c ? c->path : "unknown files";
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
    // Consecutive samples are mostly of one process, and the table mostly
    // unchanged since: then the signature is too.
    if (last_space_ != nullptr && last_pid_ == pid &&
        last_space_->table_generation == table.generation()) {
      return last_space_;
    }
    Space& sp = spaces_[pid];
    last_pid_ = pid;
    last_space_ = &sp;
    if (sp.table_generation == table.generation()) return &sp;
    sp.table_generation = table.generation();
    uint64_t sig = Signature(table, pid);
    if (sp.signature != sig) {
      sp.placed.clear();
      sp.overlaid.clear();
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
    if (!readable ||
        (!c.build_id.empty() && elf::HexBuildId(elf::ReadBuildId(c.path)) != c.build_id)) {
      // Gone, or rebuilt since: its CFI would describe other code.
      img = std::make_unique<ElfImage>();
      img->path = c.path;
      img->status = UnwindCode::kMissingFile;
      img->detail = readable ? "build-id differs" : "not found";
    } else {
      img = LoadImage(c.path);
    }
    return images_.emplace(key, std::move(img)).first->second.get();
  }

  // The placed image containing a runtime address of the sample's process,
  // placing it (from the process table's executable mapping) on first use.
  Placement* Place(Ctx* ctx, uint64_t addr) {
    // Neighbouring frames are mostly in one image.
    if (Placement* p = ctx->placed; p != nullptr && addr >= p->lo && addr < p->hi) return p;
    for (Placement* p : ctx->space->placed) {
      if (addr >= p->lo && addr < p->hi) return ctx->placed = p;
    }
    const Mapping* m = ctx->table->Lookup(ctx->sample->pid, addr);
    if (m == nullptr) {
      ctx->status = UnwindCode::kError;
      ctx->where = fmt::format("{:#x}: not in any mapping", addr);
      ctx->place = "unmapped addresses";
      return nullptr;
    }
    const ElfImage* img = nullptr;
    if (m->cookie == 0 && m->name == kVdsoName && vdso_ != nullptr) {
      img = vdso_.get();  // the same image in every process of the record's kernel
    } else if (m->cookie == 0) {
      // JIT code, anonymous memory, a vDSO without its image: no CFI to read.
      ctx->status = UnwindCode::kMissingFile;
      ctx->place = m->name.empty() ? "[anon]" : m->name;
      ctx->where = fmt::format("{}+{:#x}", ctx->place, addr - m->start);
      if (m->name == kVdsoName) ctx->where += " (the record holds no vDSO image)";
      return nullptr;
    } else if (const attribution::Cookie* c = ctx->cookies->Get(m->cookie)) {
      img = Image(*c);
    } else {
      ctx->status = UnwindCode::kError;
      ctx->where = fmt::format("{:#x}: unknown file", addr);
      ctx->place = "unknown files";
      return nullptr;
    }
    uint64_t vaddr = 0;
    if (img->status != UnwindCode::kOk || !img->VaddrOfOffset(m->pgoff, &vaddr)) {
      ctx->status =
          img->status == UnwindCode::kOk ? UnwindCode::kNoUnwindInfo : img->status.value();
      ctx->where = fmt::format("{}+{:#x}", img->path, addr - m->start + m->pgoff);
      ctx->place = img->path;
      if (!img->detail.empty()) {
        ctx->where += " (" + img->detail + ")";
        ctx->place += " (" + img->detail + ")";
      }
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
    if (!img->overlay.empty()) ctx->space->overlaid.push_back(slot.get());
    return slot.get();
  }

  // A register's location during the fast walk (libunwind's dwarf_loc_t).
  struct Loc {
    enum Kind : uint8_t { kNull, kReg, kMem } kind;
    uint64_t v;  // the register number, or the address
  };

  static bool Read(Ctx* ctx, const Loc& l, uint64_t* out) {
    switch (l.kind) {
      case Loc::kReg: {
        unw_word_t w = 0;
        AccessReg(nullptr, static_cast<unw_regnum_t>(l.v), &w, 0, ctx);
        *out = w;
        return true;
      }
      case Loc::kMem: {
        // Most reads are of the stack copy (saved registers, return
        // addresses): answered here unless an overlay could hold the address.
        if (ctx->space->overlaid.empty() && l.v >= ctx->sp &&
            l.v - ctx->sp + sizeof(uint64_t) <= ctx->stack.size()) {
          std::memcpy(out, ctx->stack.data() + (l.v - ctx->sp), sizeof(uint64_t));
          return true;
        }
        unw_word_t w = 0;
        if (AccessMem(nullptr, l.v, &w, 0, ctx) < 0) return false;
        *out = w;
        return true;
      }
      default:
        return false;
    }
  }

  // Unwinds the sample with FastRules only: true when it reached the end of
  // the call chain that way (ips then holds every frame); false as soon as a
  // frame needs anything else (a rule not read yet, a complex rule, a failed
  // read, the frame limit), and the caller starts over through libunwind.
  bool FastWalk(Ctx* ctx, uint64_t ip, std::vector<uint64_t>* ips) {
    Loc loc[17];
    for (int i = 0; i < 17; ++i) loc[i] = {Loc::kReg, static_cast<uint64_t>(i)};
    uint64_t cfa = ctx->sp;
    while (ips->size() < kMaxFrames) {
      const uint64_t lookup = ips->size() == 1 ? ip : ip - 1;
      Placement* p = Place(ctx, lookup);
      if (p == nullptr) return false;
      MemoEntry& m = memo_[(lookup * 0x9e3779b97f4a7c15ull) >> (64 - kMemoBits)];
      const Rule* rule;
      if (m.placement == p && m.addr == lookup) {
        rule = m.rule;
      } else {
        rule = RuleIn(*p, lookup);
        if (rule == nullptr) return false;
        m = MemoEntry{p, lookup, rule};
      }
      const FastRule& f = rule->fast;
      if (!f.ok) return false;
      uint64_t next_cfa = cfa;
      if (f.cfa_reg != UNW_X86_64_RSP && !Read(ctx, loc[f.cfa_reg], &next_cfa)) return false;
      next_cfa += f.cfa_off;
      for (uint8_t i = 0; i < f.count; ++i) {
        const FastRule::Set& e = f.set[i];
        loc[e.reg] = e.undefined ? Loc{Loc::kNull, 0} : Loc{Loc::kMem, next_cfa + e.off};
      }
      // An undefined return address column is the end of the chain.
      if (loc[kRipColumn].kind == Loc::kNull) return true;
      uint64_t next = 0;
      if (!Read(ctx, loc[kRipColumn], &next)) return false;
      if (next == ip && next_cfa == cfa) return false;  // libunwind: a bad frame
      if (next == 0) return true;
      cfa = next_cfa;
      ip = next;
      ips->push_back(ip);
    }
    return false;
  }

  // The rule for ctx->lookup: from the placement's rules, or by reading the
  // FDE that covers it (all of its rows at once).
  const Rule* FindRule(Ctx* ctx, unw_cursor_t* cursor) {
    Placement* p = Place(ctx, ctx->lookup);
    if (p == nullptr) return nullptr;
    // A direct-mapped memo of (placement, address) -> rule in front of the
    // rules' ordered map: most frames of most samples were seen before.
    // Entries never go stale (placements and their rules live as long as
    // the unwinder).
    MemoEntry& m = memo_[(ctx->lookup * 0x9e3779b97f4a7c15ull) >> (64 - kMemoBits)];
    if (m.placement == p && m.addr == ctx->lookup) return m.rule;
    const Rule* rule = RuleIn(*p, ctx->lookup);
    if (rule == nullptr) {
      ctx->collect = p;
      int r = unw_reg_states_iterate(cursor, &Collect, ctx);
      ctx->collect = nullptr;
      if (r < 0) {
        if (ctx->status.empty()) {
          ctx->status = UnwindCode::kError;
          ctx->where = fmt::format("{}+{:#x}: {}", p->img->path, ctx->lookup - p->bias,
                                   unw_strerror(static_cast<unw_error_t>(-r)));
          ctx->place = p->img->path;
        }
        return nullptr;
      }
      rule = RuleIn(*p, ctx->lookup);
      if (rule == nullptr) {
        ctx->status = UnwindCode::kNoUnwindInfo;
        ctx->where = fmt::format("{}+{:#x} (no CFI row)", p->img->path, ctx->lookup - p->bias);
        ctx->place = p->img->path;
        return nullptr;
      }
    }
    m = MemoEntry{p, ctx->lookup, rule};
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
    rule.fast = MakeFastRule(data, size);
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
    // .eh_frame_hdr's table first, then the built ones (the code of a
    // binary built without .eh_frame has its CFI in .debug_frame).
    int r = -UNW_ENOINFO;
    for (const CfiTable& t : img->tables) {
      unw_dyn_info_t di;
      std::memset(&di, 0, sizeof(di));
      di.format = UNW_INFO_FORMAT_REMOTE_TABLE;
      di.start_ip = p->lo;
      di.end_ip = p->hi;
      di.u.rti.segbase = t.segbase + p->bias;
      di.u.rti.table_data = t.table_vaddr + p->bias;
      // In words; each entry is two int32 (initial location, FDE address).
      di.u.rti.table_len = t.fde_count * 8 / sizeof(unw_word_t);
      r = _Ux86_64_dwarf_search_unwind_table(as, ip, &di, pi, need_unwind_info, arg);
      if (r != -UNW_ENOINFO) break;
    }
    if (r == -UNW_ENOINFO) {
      ctx->status = UnwindCode::kNoUnwindInfo;
      ctx->where = fmt::format("{}+{:#x} (no FDE in {})", img->path, ip - p->bias, img->sources);
      ctx->place = img->path;
      return -UNW_EINVAL;
    }
    return r;
  }

  static void PutUnwindInfo(unw_addr_space_t, unw_proc_info_t*, void*) {}

  static int GetDynInfoListAddr(unw_addr_space_t, unw_word_t*, void*) { return -UNW_ENOINFO; }

  static int AccessMem(unw_addr_space_t, unw_word_t addr, unw_word_t* valp, int write, void* arg) {
    if (write) return -UNW_EINVAL;
    Ctx* ctx = static_cast<Ctx*>(arg);
    // CFI built at load time, at addresses in an image's read-only pages
    // that a stack copy never holds (BuildOverlay): answered first, as a
    // copy running past the stack's end into an image would hold the file's
    // bytes there instead.
    for (Placement* q : ctx->space->overlaid) {
      if (q->img->InOverlay(addr - q->bias, sizeof(unw_word_t))) {
        std::memcpy(valp, q->img->At(addr - q->bias, sizeof(unw_word_t)), sizeof(unw_word_t));
        return 0;
      }
    }
    const std::span<const uint8_t> stack = ctx->stack;
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
      ctx->status = UnwindCode::kTruncated;
      ctx->where = fmt::format("stack copy of {} bytes ends at sp+{:#x}, frame needs sp+{:#x}",
                               stack.size(), stack.size(), addr - ctx->sp);
      ctx->place = fmt::format("stack copy of {} bytes", stack.size());
    } else if (ctx->status.empty()) {
      ctx->status = UnwindCode::kError;
      ctx->where = fmt::format("read of {:#x} below the stack pointer", addr);
      ctx->place = "reads below the stack pointer";
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

  struct MemoEntry {
    const Placement* placement = nullptr;
    uint64_t addr = 0;
    const Rule* rule = nullptr;
  };
  static constexpr int kMemoBits = 14;  // 16 Ki entries, 384 KiB
  std::vector<MemoEntry> memo_ = std::vector<MemoEntry>(size_t{1} << kMemoBits);
  uint64_t index_mask_ = 0;
  bool index_valid_ = false;
  int index_[UNW_TDEP_LAST_REG + 1];  // libunwind reg -> index in index_mask_'s regs, -1

  unw_accessors_t accessors_;
  unw_addr_space_t as_ = nullptr;
  std::unordered_map<uint32_t, Space> spaces_;  // (node-based: pointers stay valid)
  Space* last_space_ = nullptr;
  uint32_t last_pid_ = 0;
  std::map<std::pair<const ElfImage*, uint64_t>, std::unique_ptr<Placement>> placements_;
  std::unordered_map<std::string, std::unique_ptr<ElfImage>> images_;
  std::unique_ptr<ElfImage> vdso_;  // set_vdso's, or none
  UnwindStats stats_;
};

}  // namespace

std::unique_ptr<DwarfUnwinder> MakeDwarfUnwinder() { return std::make_unique<Unwinder>(); }

}  // namespace flightrec::recorder::unwind