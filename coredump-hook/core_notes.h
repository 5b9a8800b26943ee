// CheckNotesForLibunwind: whether a core's notes are safe to give to
// libunwind-coredump, which reads them without bounds checks.
//
// Why: libunwind-coredump 1.6.2 (Debian's libunwind8; upstream's
// src/coredump/ still reads so) trusts every size in the PT_NOTE segments
// it reads in _UCD_create:
//   * _UCD_elf_visit_notes reads a note header, name and desc without
//     checking that they lie within the segment (nor that the sizes, added
//     in `unsigned`, do not wrap);
//   * its visitors strcmp() the name with "CORE" without checking that it
//     ends within n_namesz, and memcpy() a whole prstatus (NT_PRSTATUS) or
//     fpregset (NT_PRFPREG, into the thread before it, index -1 when no
//     NT_PRSTATUS came first) whatever n_descsz says
//     (_UCD_get_threadinfo_prstatus.c _save_thread_notes);
//   * _handle_nt_file_note (_UCD_get_mapinfo_linux.c, called from
//     _UCD_get_mapinfo) reads `count` entries and `count` filenames with
//     strlen() without comparing either with n_descsz: a crafted NT_FILE
//     (a count past the note's end, a filename without its NUL) makes it
//     read out of bounds, and a large count crashes it.
// The crashed program writes its own core's bytes, so the unwinder child
// checks the notes first, exactly as libunwind will walk them, and skips the
// libunwind walk (with a note saying why) when they are not what a kernel
// writes (fs/binfmt_elf.c writenote, fill_files_note). elfutils' libdwfl
// bounds-checks the same note itself (handle_file_note), so its walk still
// runs.
//
// Pure functions over bytes or a file; run in the sandboxed unwinder child.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.h"

namespace flightrec::coredump {

// One PT_NOTE segment's bytes. `seen_prstatus` carries across the segments
// of one core (libunwind counts threads across them). Corrupt with the
// reason for the first note libunwind would misread.
Status CheckNoteSegmentForLibunwind(const uint8_t* p, size_t n, bool* seen_prstatus);

// An NT_FILE note's desc: count and page size, then `count` (start, end,
// offset in pages) entries, then `count` NUL-terminated filenames, all
// within n bytes; page size a power of two from 4 KiB to 1 MiB (or 1, as
// gdb's gcore writes), each range
// page-aligned and not empty, each file offset in bytes within 64 bits.
Status CheckNtFile(const uint8_t* desc, size_t n);

// Every PT_NOTE segment of the ELF core at `path` (the file _UCD_create
// would open), at most `max_notes` bytes in all.
Status CheckNotesForLibunwind(const std::string& path, uint64_t max_notes = 64ull << 20);

}  // namespace flightrec::coredump
