// libdw on one file's DWARF (the file itself or its separate debug file):
// the inline chain and source file:line at an address.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "recorder/model/frame_status.h"

namespace flightrec::recorder::symbolize {

using recorder::Symbol;
using recorder::SymbolCode;

class DwarfFile {
 public:
  // Null if the file cannot be opened or has no DWARF.
  static std::unique_ptr<DwarfFile> Open(const std::string& path);
  virtual ~DwarfFile() = default;

  // Appends the inline chain at link-time address vaddr, innermost first;
  // the last entry is the containing (non-inlined) function. Returns false if
  // the address has no DWARF. File:line only when `lines`.
  virtual bool Frames(uint64_t vaddr, bool lines, std::vector<Symbol>* out) = 0;
};

}  // namespace flightrec::recorder::symbolize
