#include "recorder/symbolize/elf_symbols.h"

#include <cxxabi.h>
#include <elfutils/libdwelf.h>
#include <gelf.h>

#include <cstdlib>
#include <cstring>

#include "recorder/elf/build_id.h"
#include "recorder/elf/elf_handle.h"
#include "recorder/elf/symbols.h"

namespace flightrec::recorder::symbolize {

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

bool ReadElfSymbolsFrom(Elf* elf, SymTuples* out, SegTuples* segs, ElfFacts* facts) {
  if (!elf || elf_kind(elf) != ELF_K_ELF) return false;
  facts->build_id = elf::BuildIdOf(elf);
  GElf_Word crc = 0;
  if (const char* link = dwelf_elf_gnu_debuglink(elf, &crc)) facts->debuglink = link;
  if (out != nullptr) facts->plt = attribution::SynthesizePltSymbols(elf);
  if (segs) {
    size_t n = 0;
    elf_getphdrnum(elf, &n);
    for (size_t i = 0; i < n; ++i) {
      GElf_Phdr ph;
      if (gelf_getphdr(elf, static_cast<int>(i), &ph) && ph.p_type == PT_LOAD) {
        segs->emplace_back(ph.p_offset, ph.p_vaddr, ph.p_filesz);
      }
    }
  }
  size_t shstrndx = 0;
  elf_getshdrstrndx(elf, &shstrndx);
  Elf_Scn* scn = nullptr;
  while ((scn = elf_nextscn(elf, scn)) != nullptr) {
    GElf_Shdr sh;
    if (gelf_getshdr(scn, &sh) == nullptr) continue;
    if (sh.sh_type == SHT_PROGBITS && sh.sh_size > 0) {
      const char* name = elf_strptr(elf, shstrndx, sh.sh_name);
      if (name &&
          (std::strcmp(name, ".debug_info") == 0 || std::strcmp(name, ".zdebug_info") == 0)) {
        facts->has_debug_info = true;
        facts->compressed_debug =
            (sh.sh_flags & SHF_COMPRESSED) != 0 || std::strcmp(name, ".zdebug_info") == 0;
      }
    }
    if (sh.sh_type == SHT_SYMTAB) facts->has_symtab = true;
  }
  if (out == nullptr) return true;
  elf::ForEachFunctionSymbol(elf, SHT_NULL, [&](const GElf_Sym& sym, const char* name) {
    if (sym.st_value != 0 && *name != '\0') out->emplace_back(sym.st_value, sym.st_size, name);
    return true;
  });
  return true;
}

bool ReadElfSymbols(const std::string& path, SymTuples* out, SegTuples* segs, ElfFacts* facts) {
  elf::ElfFile f = elf::ElfFile::Open(path);
  return ReadElfSymbolsFrom(f.elf(), out, segs, facts);
}

}  // namespace flightrec::recorder::symbolize
