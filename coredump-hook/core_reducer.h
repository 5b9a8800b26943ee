// CoreReducer: the part of a core the unwinder needs, cut out of the kernel's
// stream as it goes by, so a core of any size gets a backtrace with bounded
// disk use.
//
// Why: the hook tees the core for the sandboxed unwinder into a temporary
// file while it compresses it into the store. Teeing the whole core would put
// up to its full size in /var/tmp per running hook (and the kernel runs up to
// core_pipe_limit = 64 at once); refusing large cores would give them no
// backtrace. An unwinder reads only the notes (every thread's registers, the
// NT_FILE table of mapped files) and, of the memory, each thread's stack from
// its stack pointer up plus the first page of each mapped ELF file and of
// the vDSO (libdwfl finds modules by their headers in the core); code and
// unwind tables come from the files on disk. So the reducer keeps:
//   * the ELF header, the program headers and the PT_NOTE segments (at most
//     Limits::max_notes);
//   * every PT_LOAD segment whole when all of them fit Limits::max_memory
//     (the usual case: the reduced core is the core);
//   * otherwise, within max_memory and in this order: the crashing thread's
//     stack window [sp - 4 KiB, sp + stack_window) (of the segment holding
//     its stack pointer); the segments where a mapped file starts at file
//     offset 0 (NT_FILE) or the vDSO starts (AT_SYSINFO_EHDR in NT_AUXV),
//     up to small_segment bytes each; the other threads' stack windows; any
//     other segment of at most small_segment bytes, smallest first. The
//     first stack window that does not fit whole is cut to what is left.
// Segments left out get p_filesz = 0 (p_memsz kept), the kernel's mark of
// memory not in the core, so a read there fails (the unwinder stops)
// instead of seeing zeros. Kept bytes are packed into the output file, whose
// program headers are rewritten to point at them.
//
// Kernel cores put the headers and notes first, then the memory (fs/binfmt_elf.c
// elf_core_dump), so the plan is made from the notes before any memory
// arrives and nothing but the notes is buffered. Input that is not a native
// ELF core, or is laid out otherwise, is refused with the reason.
//
// Single-threaded; runs in the sandboxed unwinder child (UnwinderChild in
// coredump.cc) on untrusted bytes, never in the hook itself, and still
// every offset and size is checked before use.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include <elf.h>

#include "common/status.h"

namespace flightrec::coredump {

class CoreReducer {
 public:
  struct Limits {
    uint64_t max_notes = 16ull << 20;    // notes of ~10 000 threads, NT_FILE of 65 000 mappings
    uint64_t max_memory = 48ull << 20;   // kept memory bytes
    uint64_t stack_window = 1ull << 20;  // above sp: 64 frames of up to 16 KiB
    uint64_t small_segment = 64ull << 10;
  };
  struct Thread {
    pid_t tid = 0;  // pr_pid: in the crashed process's pid namespace
    uint64_t sp = 0;
    bool stack_kept = false;  // the window above sp is in the reduced core
  };

  // Writes the reduced core to out_fd (at offsets from 0).
  CoreReducer(int out_fd, Limits limits);

  // The next n bytes of the core stream.
  void Feed(const char* data, size_t n);
  // After the last byte: writes the headers. An error says why there is no
  // usable core for the unwinder (and nothing should be unwound).
  Status Finish();

  uint64_t kept_bytes() const { return kept_bytes_; }      // memory written to out_fd
  uint64_t memory_bytes() const { return memory_bytes_; }  // memory in the core
  bool reduced() const { return reduced_; }
  const std::vector<Thread>& threads() const { return threads_; }

 private:
  // A kept piece of one PT_LOAD segment: vaddr range [lo, hi), found at
  // stream offset `in` and written to output offset `out`.
  struct Range {
    size_t phdr = 0;
    uint64_t lo = 0, hi = 0;
    uint64_t in = 0, out = 0;
  };
  void Fail(std::string why);
  bool ParseHeader();
  bool ParsePhdrs();
  void ParseNotes();
  void Plan();
  void WriteKept(const char* data, size_t n);

  int fd_;
  Limits limits_;
  uint64_t pos_ = 0;  // stream bytes seen
  std::string head_;  // stream bytes [0, head_end_)
  uint64_t head_end_ = sizeof(Elf64_Ehdr);
  bool planned_ = false;
  Status error_;
  Elf64_Ehdr ehdr_{};
  std::vector<Elf64_Phdr> phdrs_;
  std::vector<Thread> threads_;
  std::vector<uint64_t> header_vaddrs_;  // where mapped ELF files and the vDSO start
  std::vector<Range> ranges_;            // ascending stream offset
  size_t next_range_ = 0;
  uint64_t kept_bytes_ = 0;
  uint64_t written_ = 0;       // memory bytes written to fd_ so far
  uint64_t memory_bytes_ = 0;  // saturates at UINT64_MAX
  bool reduced_ = false;
};

}  // namespace flightrec::coredump
