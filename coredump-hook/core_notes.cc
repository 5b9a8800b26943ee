#include "coredump-hook/core_notes.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/procfs.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "common/scoped_fd.h"

namespace flightrec::coredump {
namespace {

uint64_t Align4(uint64_t v) { return (v + 3) & ~uint64_t{3}; }

bool ReadAt(int fd, void* buf, size_t n, uint64_t off) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    ssize_t r = pread(fd, p, n, static_cast<off_t>(off));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    off += static_cast<uint64_t>(r);
    n -= static_cast<size_t>(r);
  }
  return true;
}

}  // namespace

Status CheckNtFile(const uint8_t* desc, size_t n) {
  uint64_t head[2];  // count, page size
  if (n < sizeof(head))
    return Corrupt(fmt::format("NT_FILE: {} bytes, shorter than its header", n));
  std::memcpy(head, desc, sizeof(head));
  const uint64_t count = head[0], page = head[1];
  if (count > (n - sizeof(head)) / 24) {
    return Corrupt(fmt::format("NT_FILE: {} entries do not fit its {} bytes", count, n));
  }
  // The kernel's PAGE_SIZE; gdb's gcore writes 1 (offsets in bytes).
  if (page == 0 || page > (1u << 20) || (page & (page - 1)) != 0 || (page > 1 && page < 4096)) {
    return Corrupt(fmt::format("NT_FILE: page size {}", page));
  }
  for (uint64_t k = 0; k < count; ++k) {
    uint64_t e[3];  // start, end, file offset in pages
    std::memcpy(e, desc + sizeof(head) + k * 24, sizeof(e));
    uint64_t bytes = 0;
    if (e[0] >= e[1] || e[0] % page != 0 || e[1] % page != 0 ||
        __builtin_mul_overflow(e[2], page, &bytes)) {
      return Corrupt(
          fmt::format("NT_FILE: entry {} maps [{:#x}, {:#x}) at page {}", k, e[0], e[1], e[2]));
    }
  }
  const uint8_t* s = desc + sizeof(head) + count * 24;
  const uint8_t* end = desc + n;
  for (uint64_t k = 0; k < count; ++k) {
    const void* nul = std::memchr(s, 0, static_cast<size_t>(end - s));
    if (nul == nullptr) {
      return Corrupt(
          fmt::format("NT_FILE: filename {} of {} does not end within the note", k, count));
    }
    s = static_cast<const uint8_t*>(nul) + 1;
  }
  return OkStatus();
}

Status CheckNoteSegmentForLibunwind(const uint8_t* p, size_t n, bool* seen_prstatus) {
  // As _UCD_elf_visit_notes walks: note after note until the segment's end.
  for (uint64_t off = 0; off < n;) {
    Elf64_Nhdr nh;
    if (n - off < sizeof(nh)) {
      return Corrupt(fmt::format("note at {}: {} bytes left for a 12-byte header", off, n - off));
    }
    std::memcpy(&nh, p + off, sizeof(nh));
    const uint64_t name = off + sizeof(nh);
    const uint64_t desc = name + Align4(nh.n_namesz);
    const uint64_t next = desc + Align4(nh.n_descsz);  // < 2^35: no overflow
    if (next > n) {
      return Corrupt(
          fmt::format("note at {}: name of {} and desc of {} bytes past its segment's {}", off,
                      nh.n_namesz, nh.n_descsz, n));
    }
    // Its name is compared with strcmp.
    if (nh.n_namesz == 0 || std::memchr(p + name, 0, nh.n_namesz) == nullptr) {
      return Corrupt(
          fmt::format("note at {}: name not NUL-terminated within its {} bytes", off, nh.n_namesz));
    }
    if (nh.n_type == NT_PRSTATUS) {
      if (nh.n_descsz < sizeof(prstatus_t)) {
        return Corrupt(fmt::format("note at {}: NT_PRSTATUS of {} bytes", off, nh.n_descsz));
      }
      *seen_prstatus = true;
    } else if (nh.n_type == NT_PRFPREG) {
      if (nh.n_descsz < sizeof(elf_fpregset_t) || !*seen_prstatus) {
        return Corrupt(fmt::format("note at {}: NT_PRFPREG of {} bytes{}", off, nh.n_descsz,
                                   *seen_prstatus ? "" : " before any NT_PRSTATUS"));
      }
    } else if (nh.n_type == NT_FILE) {
      if (Status s = CheckNtFile(p + desc, nh.n_descsz); !s.ok()) {
        return Corrupt(fmt::format("note at {}: {}", off, s.message()));
      }
    }
    off = next;
  }
  return OkStatus();
}

Status CheckNotesForLibunwind(const std::string& path, uint64_t max_notes) {
  ScopedFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return ErrnoStatus("opening the core " + path);
  Elf64_Ehdr eh;
  if (!ReadAt(fd.get(), &eh, sizeof(eh), 0) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr)) {
    return Corrupt("not a 64-bit ELF file");
  }
  std::vector<Elf64_Phdr> ph(eh.e_phnum);
  if (!ReadAt(fd.get(), ph.data(), ph.size() * sizeof(Elf64_Phdr), eh.e_phoff)) {
    return Corrupt("program headers past the end of the file");
  }
  uint64_t total = 0;
  bool seen_prstatus = false;
  std::vector<uint8_t> seg;
  for (size_t i = 0; i < ph.size(); ++i) {
    if (ph[i].p_type != PT_NOTE) continue;
    if (__builtin_add_overflow(total, ph[i].p_filesz, &total) || total > max_notes) {
      return Corrupt(fmt::format("notes of more than {} bytes", max_notes));
    }
    seg.resize(static_cast<size_t>(ph[i].p_filesz));
    if (!ReadAt(fd.get(), seg.data(), seg.size(), ph[i].p_offset)) {
      return Corrupt(fmt::format("PT_NOTE segment {} past the end of the file", i));
    }
    if (Status s = CheckNoteSegmentForLibunwind(seg.data(), seg.size(), &seen_prstatus); !s.ok()) {
      return Corrupt(fmt::format("PT_NOTE segment {}: {}", i, s.message()));
    }
  }
  return OkStatus();
}

}  // namespace flightrec::coredump
