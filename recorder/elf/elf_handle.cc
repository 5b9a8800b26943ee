#include "recorder/elf/elf_handle.h"

#include <cerrno>

#include "common/regular_file.h"

namespace flightrec::recorder::elf {

ElfFile ElfFile::Open(const std::string& path) {
  ScopedFd fd = OpenRegularFile(path);
  if (!fd) {
    ElfFile f;
    f.open_errno_ = errno;
    return f;
  }
  return FromFd(std::move(fd));
}

ElfFile ElfFile::FromFd(ScopedFd fd) {
  ElfFile f;
  f.fd_ = std::move(fd);
  elf_version(EV_CURRENT);
  f.elf_.reset(elf_begin(f.fd_.get(), ELF_C_READ_MMAP, nullptr));
  if (f.elf_ && elf_kind(f.elf_.get()) != ELF_K_ELF) f.elf_.reset();
  return f;
}

ElfPtr ElfFromMemory(std::string* image) {
  elf_version(EV_CURRENT);
  ElfPtr elf(elf_memory(image->data(), image->size()));
  if (elf && elf_kind(elf.get()) != ELF_K_ELF) elf.reset();
  return elf;
}

}  // namespace flightrec::recorder::elf
