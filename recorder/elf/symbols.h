// The one walk over an ELF file's symbol tables (.symtab, .dynsym): the
// symbolizer names addresses with it, the uprobe trigger finds a function's
// address with it. Never reads outside a section's data: the file may be
// hostile (an entry size of 0, a count past the data, a bad name offset).
#pragma once

#include <gelf.h>
#include <libelf.h>

#include <functional>

namespace flightrec::recorder::elf {

// Calls fn(symbol, name) for each defined function symbol
// (STT_FUNC, not SHN_UNDEF, a readable name) of the symbol-table sections,
// in section order; only sections of `type` (SHT_SYMTAB or SHT_DYNSYM), or
// both when type is SHT_NULL. fn returns false to stop the walk.
void ForEachFunctionSymbol(Elf* elf, Elf64_Word type,
                           const std::function<bool(const GElf_Sym&, const char*)>& fn);

}  // namespace flightrec::recorder::elf
