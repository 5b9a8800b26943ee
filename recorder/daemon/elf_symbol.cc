#include "recorder/daemon/elf_symbol.h"

#include <fcntl.h>

#include <gelf.h>
#include <libelf.h>
#include <memory>

#include <fmt/format.h>

#include "common/regular_file.h"
#include "recorder/elf/elf_handle.h"
#include "recorder/elf/symbols.h"

namespace flightrec::recorder {
namespace {

// Finds the symbol's virtual address in one symbol table section type.
bool FindSymbol(Elf* elf, Elf64_Word type, const std::string& name, uint64_t* vaddr) {
  bool found = false;
  elf::ForEachFunctionSymbol(elf, type, [&](const GElf_Sym& sym, const char* n) {
    if (name != n) return true;
    *vaddr = sym.st_value;
    found = true;
    return false;
  });
  return found;
}

}  // namespace

StatusOr<UprobeTarget> ParseUprobeSpec(const std::string& spec) {
  size_t colon = spec.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == spec.size()) {
    return InvalidArgument(
        fmt::format("uprobe '{}': expected /path/to/binary:function (or :0xOFFSET)", spec));
  }
  UprobeTarget t;
  t.path = spec.substr(0, colon);
  t.symbol = spec.substr(colon + 1);
  if (t.path[0] != '/') {
    return InvalidArgument(fmt::format("uprobe '{}': the binary path must be absolute", spec));
  }
  if (t.symbol.rfind("0x", 0) == 0) {
    try {
      t.file_offset = std::stoull(t.symbol, nullptr, 16);
    } catch (...) {
      return InvalidArgument(fmt::format("uprobe '{}': bad offset", spec));
    }
  }
  return t;
}

StatusOr<UprobeTarget> ResolveUprobeTarget(const std::string& spec) {
  ASSIGN_OR_RETURN(UprobeTarget t, ParseUprobeSpec(spec));
  t.file = OpenRegularFile(t.path);
  if (!t.file && errno == EINVAL) {
    return InvalidArgument(fmt::format("uprobe '{}': {} is not a regular file", spec, t.path));
  }
  if (!t.file) return ErrnoStatus(fmt::format("uprobe '{}': cannot open {}", spec, t.path));
  if (t.symbol.rfind("0x", 0) == 0) return t;
  elf::ElfFile file = elf::ElfFile::FromFd(ScopedFd(fcntl(t.file.get(), F_DUPFD_CLOEXEC, 0)));
  if (!file)
    return InvalidArgument(fmt::format("uprobe '{}': {} is not an ELF file", spec, t.path));
  Elf* elf = file.elf();
  uint64_t vaddr = 0;
  if (!FindSymbol(elf, SHT_SYMTAB, t.symbol, &vaddr) &&
      !FindSymbol(elf, SHT_DYNSYM, t.symbol, &vaddr)) {
    return NotFound(
        fmt::format("uprobe '{}': no function '{}' in {} (stripped?)", spec, t.symbol, t.path));
  }
  size_t nphdr = 0;
  elf_getphdrnum(elf, &nphdr);
  for (size_t i = 0; i < nphdr; ++i) {
    GElf_Phdr ph;
    if (gelf_getphdr(elf, static_cast<int>(i), &ph) == nullptr || ph.p_type != PT_LOAD) {
      continue;
    }
    if (vaddr >= ph.p_vaddr && vaddr < ph.p_vaddr + ph.p_filesz) {
      t.file_offset = vaddr - ph.p_vaddr + ph.p_offset;
      return t;
    }
  }
  return NotFound(
      fmt::format("uprobe '{}': symbol at 0x{:x} is in no loadable segment", spec, vaddr));
}

}  // namespace flightrec::recorder
