#include "recorder/attribution/plt_symbols.h"

#include <gelf.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include <fmt/format.h>

namespace flightrec::recorder::attribution {
namespace {

// A section of the file; scn == nullptr when there is none. (Not an
// std::optional: GCC 12 then warns the header may be read uninitialised.)
struct Section {
  Elf_Scn* scn = nullptr;
  GElf_Shdr sh{};
  explicit operator bool() const { return scn != nullptr; }
};

Section FindSection(Elf* elf, const char* want) {
  size_t shstrndx = 0;
  if (elf_getshdrstrndx(elf, &shstrndx) != 0) return {};
  Elf_Scn* scn = nullptr;
  while ((scn = elf_nextscn(elf, scn)) != nullptr) {
    GElf_Shdr sh;
    if (gelf_getshdr(scn, &sh) == nullptr) continue;
    const char* name = elf_strptr(elf, shstrndx, sh.sh_name);
    if (name != nullptr && std::strcmp(name, want) == 0) return Section{scn, sh};
  }
  return {};
}

// Relocations of a REL or RELA section: (GOT slot address, symbol index).
std::vector<std::pair<uint64_t, uint32_t>> Relocations(const Section& s) {
  std::vector<std::pair<uint64_t, uint32_t>> out;
  if (s.sh.sh_type != SHT_RELA && s.sh.sh_type != SHT_REL) return out;
  Elf_Data* data = elf_getdata(s.scn, nullptr);
  if (data == nullptr || s.sh.sh_entsize == 0) return out;
  const size_t n = s.sh.sh_size / s.sh.sh_entsize;
  for (size_t i = 0; i < n && i < (1u << 20); ++i) {
    if (s.sh.sh_type == SHT_RELA) {
      GElf_Rela r;
      if (gelf_getrela(data, static_cast<int>(i), &r) == nullptr) break;
      out.emplace_back(r.r_offset, static_cast<uint32_t>(GELF_R_SYM(r.r_info)));
    } else {
      GElf_Rel r;
      if (gelf_getrel(data, static_cast<int>(i), &r) == nullptr) break;
      out.emplace_back(r.r_offset, static_cast<uint32_t>(GELF_R_SYM(r.r_info)));
    }
  }
  return out;
}

// The name of symbol `index` of the symbol table `symtab_index` (the
// relocation section's sh_link), "" if there is none.
std::string SymbolName(Elf* elf, size_t symtab_index, uint32_t index) {
  Elf_Scn* scn = elf_getscn(elf, symtab_index);
  GElf_Shdr sh;
  if (scn == nullptr || gelf_getshdr(scn, &sh) == nullptr) return "";
  if (sh.sh_type != SHT_DYNSYM && sh.sh_type != SHT_SYMTAB) return "";
  Elf_Data* data = elf_getdata(scn, nullptr);
  GElf_Sym sym;
  if (data == nullptr || gelf_getsym(data, static_cast<int>(index), &sym) == nullptr) return "";
  const char* name = elf_strptr(elf, sh.sh_link, sym.st_name);
  return name == nullptr ? "" : name;
}

// The GOT slot an x86-64 `.plt.got` stub jumps through: `jmp *disp(%rip)`,
// after an optional endbr64 and bnd prefix (perf's get_x86_64_plt_disp).
std::optional<uint64_t> PltGotSlot(const uint8_t* p, size_t len, uint64_t addr) {
  static constexpr uint8_t kEndbr64[] = {0xf3, 0x0f, 0x1e, 0xfa};
  size_t n = 0;
  if (len >= sizeof(kEndbr64) && std::memcmp(p, kEndbr64, sizeof(kEndbr64)) == 0) {
    n += sizeof(kEndbr64);
  }
  if (n < len && p[n] == 0xf2) ++n;  // bnd
  if (n + 6 > len || p[n] != 0xff || p[n + 1] != 0x25) return std::nullopt;
  int32_t disp;
  std::memcpy(&disp, p + n + 2, sizeof(disp));
  return addr + n + 6 + static_cast<int64_t>(disp);  // rip = the next instruction
}

}  // namespace

std::vector<PltSymbol> SynthesizePltSymbols(Elf* elf) {
  std::vector<PltSymbol> out;
  GElf_Ehdr eh;
  if (gelf_getehdr(elf, &eh) == nullptr) return out;
  // Stub sizes per machine (the psABIs; perf's get_plt_sizes).
  uint64_t header = 0, entry = 0;
  const bool x86 = eh.e_machine == EM_X86_64 || eh.e_machine == EM_386;
  if (x86) {
    header = 16;
    entry = 16;
  } else if (eh.e_machine == EM_AARCH64) {
    header = 32;
    entry = 16;
  } else {
    return out;
  }
  Section plt = FindSection(elf, ".plt");
  if (!plt || plt.sh.sh_type != SHT_PROGBITS) return out;  // NOBITS: a debug file
  Section plt_sec = x86 ? FindSection(elf, ".plt.sec") : Section{};
  Section rel = FindSection(elf, ".rela.plt");
  if (!rel) rel = FindSection(elf, ".rel.plt");
  if (rel) {
    auto relocs = Relocations(rel);
    // x86 does not put IFUNC relocations in PLT order: the GOT slots are.
    if (x86) std::stable_sort(relocs.begin(), relocs.end());
    uint64_t at = plt.sh.sh_addr;
    if (plt_sec) {
      at = plt_sec.sh.sh_addr;  // IBT: the stubs called are in .plt.sec
      out.push_back({plt.sh.sh_addr, plt.sh.sh_size, ".plt"});
    } else if (relocs.size() * entry != plt.sh.sh_size) {
      out.push_back({plt.sh.sh_addr, header, ".plt"});  // the lazy-binding header
      at += header;
    }
    const uint64_t end =
        plt_sec ? plt_sec.sh.sh_addr + plt_sec.sh.sh_size : plt.sh.sh_addr + plt.sh.sh_size;
    for (const auto& [slot, index] : relocs) {
      if (at + entry > end) break;
      std::string name = index ? SymbolName(elf, rel.sh.sh_link, index) : "";
      if (name.empty()) name = fmt::format("offset_{:#x}", slot);  // an IFUNC's IRELATIVE
      out.push_back({at, entry, name + "@plt"});
      at += entry;
    }
  }
  // .plt.got: stubs for functions whose GOT slot is also taken by address
  // (or all of them with -z now), named through .rela.dyn.
  Section plt_got = eh.e_machine == EM_X86_64 ? FindSection(elf, ".plt.got") : Section{};
  Section rela_dyn = FindSection(elf, ".rela.dyn");
  if (plt_got && rela_dyn && plt_got.sh.sh_entsize != 0 && plt_got.sh.sh_type == SHT_PROGBITS) {
    Elf_Data* data = elf_getdata(plt_got.scn, nullptr);
    auto relocs = Relocations(rela_dyn);
    std::sort(relocs.begin(), relocs.end());
    const uint64_t step = plt_got.sh.sh_entsize;
    for (uint64_t off = 0; data != nullptr && off + step <= data->d_size; off += step) {
      const uint64_t addr = plt_got.sh.sh_addr + off;
      auto slot = PltGotSlot(static_cast<const uint8_t*>(data->d_buf) + off, step, addr);
      std::string name;
      if (slot) {
        auto it = std::lower_bound(relocs.begin(), relocs.end(), std::make_pair(*slot, 0u));
        if (it != relocs.end() && it->first == *slot && it->second != 0) {
          name = SymbolName(elf, rela_dyn.sh.sh_link, it->second);
        }
      }
      if (name.empty()) name = fmt::format("offset_{:#x}", addr);
      out.push_back({addr, step, name + "@plt"});
    }
  }
  return out;
}

}  // namespace flightrec::recorder::attribution
