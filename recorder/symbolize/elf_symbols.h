// Function symbols, PT_LOAD segments and debug facts of one ELF file, as the
// symbolizer reads them (.symtab, .dynsym, synthesized PLT stubs).
#pragma once

#include <libelf.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "recorder/attribution/plt_symbols.h"

namespace flightrec::recorder::symbolize {

// A C++ symbol demangled (PLT stubs keep their "@plt"); other names as is.
std::string Demangle(const std::string& name);

// What the symbolizer needs to know about one ELF file.
struct ElfFacts {
  std::string build_id;  // raw bytes
  bool has_symtab = false;
  bool has_debug_info = false;              // a non-empty .debug_info (not NOBITS)
  bool compressed_debug = false;            // zlib/zstd-compressed DWARF (SHF_COMPRESSED, .zdebug)
  std::string debuglink;                    // .gnu_debuglink file name, "" if none
  std::vector<attribution::PltSymbol> plt;  // the file's PLT stubs (a debug file has none)
};

using SymTuples = std::vector<std::tuple<uint64_t, uint64_t, std::string>>;
using SegTuples = std::vector<std::tuple<uint64_t, uint64_t, uint64_t>>;

// Fills *facts and, where non-null, *out (function symbols: address, size,
// mangled name) and *segs (PT_LOAD: offset, vaddr, filesz). False if `elf`
// is null or not ELF.
bool ReadElfSymbolsFrom(Elf* elf, SymTuples* out, SegTuples* segs, ElfFacts* facts);
bool ReadElfSymbols(const std::string& path, SymTuples* out, SegTuples* segs, ElfFacts* facts);

}  // namespace flightrec::recorder::symbolize
