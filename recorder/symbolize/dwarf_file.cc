#include "recorder/symbolize/dwarf_file.h"

#include <dwarf.h>
#include <elfutils/libdw.h>

#include <algorithm>
#include <unordered_map>

#include "common/scoped_fd.h"
#include "recorder/elf/elf_handle.h"
#include "recorder/symbolize/elf_symbols.h"

namespace flightrec::recorder::symbolize {
namespace {

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

// The Dwarf handle keeps the Elf and fd it was opened from.
class LibdwFile : public DwarfFile {
 public:
  static std::unique_ptr<LibdwFile> Open(const std::string& path) {
    auto d = std::make_unique<LibdwFile>();
    elf::ElfFile f = elf::ElfFile::Open(path);
    if (!f) return nullptr;
    d->fd_ = f.ReleaseFd();
    d->elf_ = f.ReleaseElf();
    d->dwarf_ = dwarf_begin_elf(d->elf_.get(), DWARF_C_READ, nullptr);
    if (d->dwarf_ == nullptr) return nullptr;
    return d;
  }
  LibdwFile() = default;
  ~LibdwFile() override {
    if (dwarf_) dwarf_end(dwarf_);
  }

  bool Frames(uint64_t vaddr, bool lines, std::vector<Symbol>* out) override {
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
      s.status = SymbolCode::kOk;
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
  elf::ElfPtr elf_;
  Dwarf* dwarf_ = nullptr;
  std::unordered_map<Dwarf_Off, std::vector<FuncRange>> funcs_;  // by CU DIE offset
};

}  // namespace

std::unique_ptr<DwarfFile> DwarfFile::Open(const std::string& path) {
  return LibdwFile::Open(path);
}

}  // namespace flightrec::recorder::symbolize
