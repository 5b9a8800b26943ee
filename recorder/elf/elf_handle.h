// libelf handles with their lifetime tied to an owner: every reader of ELF
// files through libelf (symbolizer, DWARF, build-ids, uprobe targets, the
// core hook) opens them here, so elf_version is called once and no Elf* or
// fd outlives its scope.
#pragma once

#include <libelf.h>

#include <memory>
#include <string>

#include "common/scoped_fd.h"

namespace flightrec::recorder::elf {

struct ElfCloser {
  void operator()(Elf* e) const { elf_end(e); }
};
using ElfPtr = std::unique_ptr<Elf, ElfCloser>;

// An ELF file opened read-only (mmap'ed by libelf), with the fd it reads
// from. elf() is null when the file cannot be opened or is not ELF.
class ElfFile {
 public:
  // Only regular files (common/regular_file.h): a FIFO or device named by a
  // record must not block or be read.
  static ElfFile Open(const std::string& path);
  // libelf over an fd already open (a file opened with someone else's
  // credentials); takes it over.
  static ElfFile FromFd(ScopedFd fd);
  Elf* elf() const { return elf_.get(); }
  explicit operator bool() const { return elf_ != nullptr; }
  // Why Open failed to open the file (errno), or 0 when it opened but is not
  // ELF.
  int open_errno() const { return open_errno_; }
  // Keeps the fd and handle alive elsewhere (libdw's Dwarf keeps the Elf).
  ElfPtr ReleaseElf() { return std::move(elf_); }
  ScopedFd ReleaseFd() { return std::move(fd_); }

 private:
  ScopedFd fd_;
  ElfPtr elf_;
  int open_errno_ = 0;
};

// libelf over bytes in memory (a vDSO image); `image` must outlive the handle
// and be writable (elf_memory's signature). Null if not ELF.
ElfPtr ElfFromMemory(std::string* image);

}  // namespace flightrec::recorder::elf
