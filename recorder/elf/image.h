// A whole ELF64 file mapped read-only, read without libelf: its program
// headers, its sections by name and their bytes (SHF_COMPRESSED ones
// inflated). The unwinder reads CFI from it at link-time addresses; every
// read is bounds-checked, as the file is named by a record.
#pragma once

#include <elf.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/scoped_fd.h"

namespace flightrec::recorder::elf {

// Whether [offset, offset + len) lies inside [0, size), without the sum
// (values read from a file may be near 2^64).
inline bool RangeInside(uint64_t offset, uint64_t len, uint64_t size) {
  return offset <= size && len <= size - offset;
}

struct SectionHeader {
  uint64_t addr = 0, offset = 0, size = 0;
  uint64_t flags = 0;
};

class MappedElf {
 public:
  enum class Error {
    kNone,
    kCannotRead,  // missing, not a regular file, shorter than an ELF header
    kCannotMap,
    kNotX86_64,  // not ELF, not 64-bit x86-64, or program headers outside the file
  };

  MappedElf() = default;
  // Maps `path` and checks it is an x86-64 ELF64 file whose program headers
  // lie inside it; on failure *error says why and the result is empty.
  static MappedElf Open(const std::string& path, Error* error);
  // The same checks on an image held in memory (the vDSO a record carries),
  // copied into a mapping of its own; one shorter than an ELF header is
  // kNotX86_64.
  static MappedElf FromBytes(std::string_view bytes, Error* error);

  bool valid() const { return map_.valid(); }
  const uint8_t* bytes() const { return static_cast<const uint8_t*>(map_.data()); }
  size_t size() const { return map_.size(); }
  const Elf64_Ehdr& header() const { return eh_; }
  size_t phnum() const { return eh_.e_phnum; }
  Elf64_Phdr phdr(size_t i) const;

  // The named section's header, or nullopt (no section headers, no such
  // section, a NOBITS one, or one that lies outside the file).
  std::optional<SectionHeader> FindSection(std::string_view name) const;

  // The bytes of a non-allocated section, decompressed if it is
  // SHF_COMPRESSED (ld --compress-debug-sections: zlib or zstd) into
  // *storage; or an empty span and *problem.
  std::span<const uint8_t> SectionBytes(const SectionHeader& sec, std::vector<uint8_t>* storage,
                                        std::string* problem) const;

 private:
  // Takes `map` (at least an ELF header long) if its header passes the checks.
  static MappedElf Adopt(ScopedMmap map, Error* error);

  ScopedMmap map_;
  Elf64_Ehdr eh_{};
};

}  // namespace flightrec::recorder::elf
