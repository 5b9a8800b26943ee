// Names for the PLT stubs of an ELF file, which no symbol table lists: a
// sample in a stub shows as "clock_gettime@plt" (what perf and objdump show)
// rather than as the nearest symbol below it (`_init`, whose size is 0).
//
// Follows perf's dso__synthesize_plt_symbols (tools/perf/util/symbol-elf.c):
// stub i of .plt (after its header) or of .plt.sec (no header) belongs to
// relocation i of .rela.plt/.rel.plt in GOT order, and each .plt.got stub is
// named by the .rela.dyn relocation of the GOT slot its jmp reads.
#pragma once

#include <libelf.h>

#include <cstdint>
#include <string>
#include <vector>

namespace flightrec::recorder::attribution {

struct PltSymbol {
  uint64_t addr = 0;  // link-time virtual address
  uint64_t size = 0;
  std::string name;  // "name@plt", ".plt" for the lazy-binding header
};

// The PLT stubs of `elf` (x86-64, i386 and arm64; none for other machines,
// or when the sections are absent or malformed). Never reads outside the
// sections' data: the file may be hostile.
std::vector<PltSymbol> SynthesizePltSymbols(Elf* elf);

}  // namespace flightrec::recorder::attribution
