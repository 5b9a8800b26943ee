#include "coredump-hook/core_reducer.h"

#include <elf.h>
#include <sys/procfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>

#include <fmt/format.h>

namespace flightrec::coredump {
namespace {

#if defined(__x86_64__)
constexpr uint16_t kMachine = EM_X86_64;
constexpr int kSpReg = 19;  // RSP in <sys/reg.h>: user_regs_struct.rsp
#elif defined(__aarch64__)
constexpr uint16_t kMachine = EM_AARCH64;
constexpr int kSpReg = 31;  // user_pt_regs.sp
#else
#error "CoreReducer knows the stack pointer of x86_64 and aarch64 cores only"
#endif

constexpr uint64_t kPage = 4096;
// Headers beyond this are not a kernel's core (65535 program headers are
// 3.6 MiB).
constexpr uint64_t kMaxPhdrEnd = 8ull << 20;
// No segment of a real address space is larger (x86_64 has 57-bit virtual
// addresses); bigger values are hostile and would overflow sums.
constexpr uint64_t kMaxSegment = 1ull << 57;

uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// a + b, or UINT64_MAX when that overflows: a sum of sizes from the core,
// which a crafted core makes wrap to a small number.
uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
  uint64_t sum;
  return __builtin_add_overflow(a, b, &sum) ? UINT64_MAX : sum;
}

}  // namespace

CoreReducer::CoreReducer(int out_fd, Limits limits) : fd_(out_fd), limits_(limits) {}

void CoreReducer::Fail(std::string why) {
  if (error_.ok()) error_ = Status(StatusCode::kCorrupt, std::move(why));
}

bool CoreReducer::ParseHeader() {
  if (memcmp(head_.data(), ELFMAG, SELFMAG) != 0) {
    Fail("not an ELF file");
    return false;
  }
  memcpy(&ehdr_, head_.data(), sizeof(ehdr_));
  if (ehdr_.e_ident[EI_CLASS] != ELFCLASS64) {
    Fail(fmt::format("ELF class {} (32-bit or unknown): this host's cores are 64-bit",
                     ehdr_.e_ident[EI_CLASS]));
    return false;
  }
  if (ehdr_.e_ident[EI_DATA] != ELFDATA2LSB) {
    Fail(fmt::format("ELF data encoding {} (big-endian or unknown): this host is little-endian",
                     ehdr_.e_ident[EI_DATA]));
    return false;
  }
  if (ehdr_.e_type != ET_CORE) {
    Fail(fmt::format("an ELF file of type {}, not a core", ehdr_.e_type));
    return false;
  }
  if (ehdr_.e_machine != kMachine) {
    Fail(fmt::format("ELF machine {}, not this host's ({})", ehdr_.e_machine, kMachine));
    return false;
  }
  if (ehdr_.e_phentsize != sizeof(Elf64_Phdr) || ehdr_.e_phnum == 0) {
    Fail(fmt::format("{} program headers of {} bytes", ehdr_.e_phnum, ehdr_.e_phentsize));
    return false;
  }
  if (ehdr_.e_phnum == PN_XNUM) {
    // The real count is then in section header 0, which the kernel writes
    // after the memory: too late for a plan made while streaming.
    Fail("more than 65534 segments (PN_XNUM): not reduced while streaming");
    return false;
  }
  uint64_t end = ehdr_.e_phoff + uint64_t{ehdr_.e_phnum} * sizeof(Elf64_Phdr);
  if (ehdr_.e_phoff < sizeof(Elf64_Ehdr) || ehdr_.e_phoff > kMaxPhdrEnd || end > kMaxPhdrEnd) {
    Fail(fmt::format("program headers at offset {}, not after the ELF header", ehdr_.e_phoff));
    return false;
  }
  head_end_ = end;
  return true;
}

bool CoreReducer::ParsePhdrs() {
  phdrs_.resize(ehdr_.e_phnum);
  memcpy(phdrs_.data(), head_.data() + ehdr_.e_phoff, phdrs_.size() * sizeof(Elf64_Phdr));
  uint64_t notes = 0, end = head_end_;
  for (const auto& p : phdrs_) {
    uint64_t vend;
    if (p.p_filesz > kMaxSegment || p.p_offset > kMaxSegment ||
        __builtin_add_overflow(p.p_vaddr, p.p_filesz, &vend)) {
      Fail(fmt::format("a segment of {} bytes at offset {}, address {:#x}", p.p_filesz, p.p_offset,
                       p.p_vaddr));
      return false;
    }
    if (p.p_type != PT_NOTE) continue;
    notes = SaturatingAdd(notes, p.p_filesz);
    end = std::max(end, SaturatingAdd(p.p_offset, p.p_filesz));
  }
  if (notes == 0) {
    Fail("no notes: the core has no thread registers");
    return false;
  }
  if (notes > limits_.max_notes || end > head_end_ + limits_.max_notes + kPage) {
    Fail(fmt::format("notes of {} bytes ending at offset {}: over the {} limit", notes, end,
                     limits_.max_notes));
    return false;
  }
  head_end_ = end;
  return true;
}

void CoreReducer::ParseNotes() {
  for (const auto& p : phdrs_) {
    if (p.p_type != PT_NOTE) continue;
    uint64_t off = p.p_offset, end = p.p_offset + p.p_filesz;
    while (off + sizeof(Elf64_Nhdr) <= end) {
      Elf64_Nhdr nh;
      memcpy(&nh, head_.data() + off, sizeof(nh));
      // Core notes are 4-byte aligned (the kernel's writenote()).
      uint64_t desc = off + sizeof(nh) + AlignUp(nh.n_namesz, 4);
      uint64_t next = desc + AlignUp(nh.n_descsz, 4);
      if (next > end) break;
      const char* d = head_.data() + desc;
      if (nh.n_type == NT_PRSTATUS && nh.n_descsz == sizeof(prstatus_t)) {
        prstatus_t st;
        memcpy(&st, d, sizeof(st));
        threads_.push_back({st.pr_pid, static_cast<uint64_t>(st.pr_reg[kSpReg]), false});
      } else if (nh.n_type == NT_FILE && nh.n_descsz >= 16) {
        // count, page size, then count (start, end, file offset in pages):
        // mappings that start at offset 0 of their file begin with its ELF
        // header (fs/binfmt_elf.c fill_files_note).
        uint64_t count;
        memcpy(&count, d, 8);
        count = std::min<uint64_t>(count, (nh.n_descsz - 16) / 24);
        for (uint64_t k = 0; k < count; ++k) {
          uint64_t e[3];
          memcpy(e, d + 16 + k * 24, sizeof(e));
          if (e[2] == 0) header_vaddrs_.push_back(e[0]);
        }
      } else if (nh.n_type == NT_AUXV) {
        // AT_SYSINFO_EHDR: the vDSO's ELF header (clock_gettime & co).
        for (uint64_t k = 0; k + 16 <= nh.n_descsz; k += 16) {
          uint64_t av[2];
          memcpy(av, d + k, sizeof(av));
          if (av[0] == AT_SYSINFO_EHDR) header_vaddrs_.push_back(av[1]);
        }
      }
      off = next;
    }
  }
  if (threads_.empty()) Fail("no NT_PRSTATUS note: the core has no thread registers");
}

void CoreReducer::Plan() {
  std::vector<size_t> loads;
  for (size_t i = 0; i < phdrs_.size(); ++i) {
    const auto& p = phdrs_[i];
    if (p.p_type != PT_LOAD || p.p_filesz == 0) continue;
    if (p.p_offset < head_end_) {
      Fail(fmt::format("segment {} at offset {} overlaps the headers and notes", i, p.p_offset));
      return;
    }
    loads.push_back(i);
    // 65534 segments of up to kMaxSegment bytes can sum past 2^64: a wrapped
    // sum would pass for a small core and keep every segment whole.
    memory_bytes_ = SaturatingAdd(memory_bytes_, p.p_filesz);
  }
  // phdr index -> kept vaddr range.
  std::map<size_t, std::pair<uint64_t, uint64_t>> keep;
  if (memory_bytes_ <= limits_.max_memory) {
    for (size_t i : loads) keep[i] = {phdrs_[i].p_vaddr, phdrs_[i].p_vaddr + phdrs_[i].p_filesz};
  } else {
    reduced_ = true;
    uint64_t budget = limits_.max_memory;
    // The window of each thread's stack, cut to the budget left when it is
    // the first that does not fit (the innermost frames are worth more than
    // none).
    auto keep_stack = [&](const Thread& t) {
      for (size_t i : loads) {
        const auto& p = phdrs_[i];
        if (t.sp < p.p_vaddr || t.sp - p.p_vaddr >= p.p_filesz) continue;
        uint64_t end = p.p_vaddr + p.p_filesz;
        uint64_t lo = std::max(p.p_vaddr, t.sp >= kPage ? (t.sp - kPage) / kPage * kPage : 0);
        uint64_t hi = end - t.sp > limits_.stack_window ? t.sp + limits_.stack_window : end;
        auto [it, fresh] = keep.try_emplace(i, lo, lo);
        uint64_t nlo = fresh ? lo : std::min(lo, it->second.first);
        uint64_t nhi = std::max(hi, it->second.second);
        uint64_t cost = (nhi - nlo) - (it->second.second - it->second.first);
        if (cost <= budget) {
          budget -= cost;
          it->second = {nlo, nhi};
        } else if (fresh && budget > t.sp - lo + kPage) {
          it->second = {lo, lo + budget};
          budget = 0;
        } else if (fresh) {
          keep.erase(it);
        }
        return;
      }
    };
    auto keep_whole = [&](size_t i) {
      if (keep.count(i) || phdrs_[i].p_filesz > limits_.small_segment ||
          phdrs_[i].p_filesz > budget) {
        return;
      }
      budget -= phdrs_[i].p_filesz;
      keep[i] = {phdrs_[i].p_vaddr, phdrs_[i].p_vaddr + phdrs_[i].p_filesz};
    };
    // 1. The crashing thread's stack (the kernel's first note).
    if (!threads_.empty()) keep_stack(threads_[0]);
    // 2. The ELF headers of mapped files and of the vDSO: without them
    //    libdwfl knows no module, and no walk crosses a shared library.
    std::sort(header_vaddrs_.begin(), header_vaddrs_.end());
    for (size_t i : loads) {
      if (std::binary_search(header_vaddrs_.begin(), header_vaddrs_.end(), phdrs_[i].p_vaddr)) {
        keep_whole(i);
      }
    }
    // 3. The other threads' stacks.
    for (size_t k = 1; k < threads_.size(); ++k) keep_stack(threads_[k]);
    // 4. Other small segments, smallest first.
    std::vector<size_t> small = loads;
    std::stable_sort(small.begin(), small.end(),
                     [&](size_t a, size_t b) { return phdrs_[a].p_filesz < phdrs_[b].p_filesz; });
    for (size_t i : small) keep_whole(i);
  }
  for (const auto& [i, r] : keep) {
    ranges_.push_back(
        {i, r.first, r.second, phdrs_[i].p_offset + (r.first - phdrs_[i].p_vaddr), 0});
  }
  std::sort(ranges_.begin(), ranges_.end(),
            [](const Range& a, const Range& b) { return a.in < b.in; });
  uint64_t out = AlignUp(head_end_, kPage), planned = 0;
  for (Range& r : ranges_) {
    r.out = out;
    planned = SaturatingAdd(planned, r.hi - r.lo);
    out = AlignUp(SaturatingAdd(out, r.hi - r.lo), kPage);
  }
  if (planned > limits_.max_memory) {
    Fail(fmt::format("{} bytes of memory planned, over the {} limit", planned, limits_.max_memory));
    return;
  }
  for (Thread& t : threads_) {
    for (const Range& r : ranges_) {
      if (t.sp >= r.lo && t.sp < r.hi) t.stack_kept = true;
    }
  }
}

void CoreReducer::WriteKept(const char* data, size_t n) {
  const uint64_t begin = pos_, end = pos_ + n;
  while (next_range_ < ranges_.size() &&
         ranges_[next_range_].in + (ranges_[next_range_].hi - ranges_[next_range_].lo) <= begin) {
    ++next_range_;
  }
  for (size_t k = next_range_; k < ranges_.size() && ranges_[k].in < end; ++k) {
    const Range& r = ranges_[k];
    uint64_t from = std::max(begin, r.in), to = std::min(end, r.in + (r.hi - r.lo));
    if (from >= to) continue;
    const char* src = data + (from - begin);
    uint64_t dst = r.out + (from - r.in);
    size_t len = static_cast<size_t>(to - from);
    // The limit holds for what reaches the disk, whatever the plan says.
    written_ = SaturatingAdd(written_, len);
    if (written_ > limits_.max_memory) {
      Fail(fmt::format("the unwinder's copy of the core would exceed {} bytes of memory",
                       limits_.max_memory));
      return;
    }
    while (len > 0) {
      ssize_t w = pwrite(fd_, src, len, static_cast<off_t>(dst));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        Fail(fmt::format("writing the unwinder's copy of the core: {}", strerror(errno)));
        return;
      }
      src += w;
      dst += static_cast<uint64_t>(w);
      len -= static_cast<size_t>(w);
    }
  }
}

void CoreReducer::Feed(const char* data, size_t n) {
  while (n > 0 && error_.ok()) {
    if (planned_) {
      WriteKept(data, n);
      pos_ += n;
      return;
    }
    size_t take = static_cast<size_t>(std::min<uint64_t>(n, head_end_ - pos_));
    head_.append(data, take);
    pos_ += take;
    data += take;
    n -= take;
    if (pos_ < head_end_) return;
    // The head is complete up to head_end_: move to the next stage, which
    // may extend it (header -> program headers -> notes).
    if (phdrs_.empty() && head_end_ == sizeof(Elf64_Ehdr)) {
      if (!ParseHeader()) return;
      if (head_end_ > pos_) continue;
    }
    if (phdrs_.empty()) {
      if (!ParsePhdrs()) return;
      if (head_end_ > pos_) continue;
    }
    ParseNotes();
    if (error_.ok()) Plan();
    if (!error_.ok()) return;
    // Headers and notes go out now (headers are rewritten by Finish).
    for (size_t off = 0; off < head_.size();) {
      ssize_t w = pwrite(fd_, head_.data() + off, head_.size() - off, static_cast<off_t>(off));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        Fail(fmt::format("writing the unwinder's copy of the core: {}", strerror(errno)));
        return;
      }
      off += static_cast<size_t>(w);
    }
    std::string().swap(head_);
    planned_ = true;
  }
}

Status CoreReducer::Finish() {
  if (!error_.ok()) return error_;
  if (!planned_) {
    return Status(StatusCode::kCorrupt,
                  pos_ == 0 ? std::string("empty core")
                            : fmt::format("the core ends after {} bytes, before its notes", pos_));
  }
  // Left-out memory gets p_filesz = 0 with its p_memsz kept: the kernel's
  // own way of saying "mapped, not in the core" (it writes read-only file
  // mappings so), which readers take as unreadable, and which keeps the
  // address-space layout libdwfl matches modules against.
  std::vector<Elf64_Phdr> out = phdrs_;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].p_type != PT_LOAD || out[i].p_filesz == 0) continue;
    out[i].p_filesz = 0;
    out[i].p_offset = 0;
  }
  kept_bytes_ = 0;
  for (const Range& r : ranges_) {
    // A core cut short (size limit, a dying writer) keeps what arrived.
    uint64_t got = pos_ > r.in ? std::min(pos_ - r.in, r.hi - r.lo) : 0;
    Elf64_Phdr& p = out[r.phdr];
    const Elf64_Phdr& orig = phdrs_[r.phdr];
    p.p_offset = got ? r.out : 0;
    p.p_filesz = got;
    if (r.lo != orig.p_vaddr || r.hi != orig.p_vaddr + orig.p_filesz) {
      // A window of a stack: the segment becomes just that window.
      p.p_vaddr = r.lo;
      p.p_paddr = 0;
      p.p_memsz = r.hi - r.lo;
    }
    kept_bytes_ += got;
  }
  Elf64_Ehdr eh = ehdr_;
  eh.e_shoff = 0;
  eh.e_shnum = 0;
  eh.e_shstrndx = SHN_UNDEF;
  if (pwrite(fd_, &eh, sizeof(eh), 0) != static_cast<ssize_t>(sizeof(eh)) ||
      pwrite(fd_, out.data(), out.size() * sizeof(Elf64_Phdr), static_cast<off_t>(eh.e_phoff)) !=
          static_cast<ssize_t>(out.size() * sizeof(Elf64_Phdr))) {
    return ErrnoStatus("writing the unwinder's copy of the core");
  }
  return OkStatus();
}

}  // namespace flightrec::coredump
