#include "recorder/elf/image.h"

#include <sys/mman.h>
#include <sys/stat.h>

#include <cstring>

#include <fmt/format.h>
#include <zlib.h>
#include <zstd.h>

#include "common/regular_file.h"

#ifndef ELFCOMPRESS_ZSTD
#define ELFCOMPRESS_ZSTD 2  // gABI; glibc's elf.h has it from 2.38
#endif

namespace flightrec::recorder::elf {

MappedElf MappedElf::Open(const std::string& path, Error* error) {
  ScopedFd fd = OpenRegularFile(path);
  struct stat st {};
  if (!fd || fstat(fd.get(), &st) != 0 || st.st_size < static_cast<off_t>(sizeof(Elf64_Ehdr))) {
    *error = Error::kCannotRead;
    return MappedElf();
  }
  void* p = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (p == MAP_FAILED) {
    *error = Error::kCannotMap;
    return MappedElf();
  }
  return Adopt(ScopedMmap(p, static_cast<size_t>(st.st_size)), error);
}

MappedElf MappedElf::FromBytes(std::string_view bytes, Error* error) {
  if (bytes.size() < sizeof(Elf64_Ehdr)) {
    *error = Error::kNotX86_64;  // nothing to read is missing: it is not ELF
    return MappedElf();
  }
  // A private copy, read-only like a mapped file: the readers keep pointers
  // into it for as long as the image lives.
  void* p = mmap(nullptr, bytes.size(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    *error = Error::kCannotMap;
    return MappedElf();
  }
  ScopedMmap map(p, bytes.size());
  std::memcpy(p, bytes.data(), bytes.size());
  if (mprotect(p, bytes.size(), PROT_READ) != 0) {
    *error = Error::kCannotMap;
    return MappedElf();
  }
  return Adopt(std::move(map), error);
}

MappedElf MappedElf::Adopt(ScopedMmap map, Error* error) {
  MappedElf m;
  Elf64_Ehdr eh;
  std::memcpy(&eh, map.data(), sizeof(eh));
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_machine != EM_X86_64 || eh.e_phentsize != sizeof(Elf64_Phdr) ||
      !RangeInside(eh.e_phoff, uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr), map.size())) {
    *error = Error::kNotX86_64;
    return m;
  }
  m.map_ = std::move(map);
  m.eh_ = eh;
  *error = Error::kNone;
  return m;
}

Elf64_Phdr MappedElf::phdr(size_t i) const {
  Elf64_Phdr ph;
  std::memcpy(&ph, bytes() + eh_.e_phoff + i * sizeof(Elf64_Phdr), sizeof(ph));
  return ph;
}

std::optional<SectionHeader> MappedElf::FindSection(std::string_view name) const {
  const Elf64_Ehdr& eh = eh_;
  const size_t size = map_.size();
  if (eh.e_shoff == 0 || eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shstrndx >= eh.e_shnum ||
      !RangeInside(eh.e_shoff, uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr), size)) {
    return std::nullopt;
  }
  auto shdr = [&](size_t i) {
    Elf64_Shdr sh;
    std::memcpy(&sh, bytes() + eh.e_shoff + i * sizeof(Elf64_Shdr), sizeof(sh));
    return sh;
  };
  Elf64_Shdr strtab = shdr(eh.e_shstrndx);
  if (!RangeInside(strtab.sh_offset, strtab.sh_size, size)) return std::nullopt;
  for (size_t i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr sh = shdr(i);
    if (sh.sh_name >= strtab.sh_size || sh.sh_type == SHT_NOBITS) continue;
    const char* n = reinterpret_cast<const char*>(bytes() + strtab.sh_offset + sh.sh_name);
    size_t max = strtab.sh_size - sh.sh_name;
    if (strnlen(n, max) != name.size() || std::memcmp(n, name.data(), name.size()) != 0) continue;
    if (!RangeInside(sh.sh_offset, sh.sh_size, size)) return std::nullopt;
    return SectionHeader{sh.sh_addr, sh.sh_offset, sh.sh_size, sh.sh_flags};
  }
  return std::nullopt;
}

std::span<const uint8_t> MappedElf::SectionBytes(const SectionHeader& sec,
                                                 std::vector<uint8_t>* storage,
                                                 std::string* problem) const {
  const uint8_t* raw = bytes() + sec.offset;
  if ((sec.flags & SHF_COMPRESSED) == 0) return {raw, sec.size};
  Elf64_Chdr ch;
  if (sec.size < sizeof(ch)) {
    *problem = "truncated compressed section";
    return {};
  }
  std::memcpy(&ch, raw, sizeof(ch));
  // A .debug_frame is a few percent of the code; a size beyond 1 GiB is a
  // corrupt header, not something to allocate.
  if (ch.ch_size > (uint64_t{1} << 30)) {
    *problem = "compressed section claims more than 1 GiB";
    return {};
  }
  storage->resize(ch.ch_size);
  const uint8_t* src = raw + sizeof(ch);
  size_t src_len = sec.size - sizeof(ch);
  if (ch.ch_type == ELFCOMPRESS_ZLIB) {
    uLongf out = static_cast<uLongf>(ch.ch_size);
    if (uncompress(storage->data(), &out, src, static_cast<uLong>(src_len)) == Z_OK &&
        out == ch.ch_size) {
      return {storage->data(), storage->size()};
    }
  } else if (ch.ch_type == ELFCOMPRESS_ZSTD) {
    size_t n = ZSTD_decompress(storage->data(), storage->size(), src, src_len);
    if (!ZSTD_isError(n) && n == ch.ch_size) return {storage->data(), storage->size()};
  } else {
    *problem = fmt::format("unknown section compression {}", ch.ch_type);
    return {};
  }
  *problem = "compressed section does not decompress";
  return {};
}

}  // namespace flightrec::recorder::elf
