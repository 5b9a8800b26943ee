// Reading a whole small file (a /proc or /sys text, a config) into memory
// with read(2), bounded, never throwing.
//
// Why not std::istreambuf_iterator: libstdc++'s basic_filebuf::underflow
// throws std::ios_base::failure when read(2) fails, and an istreambuf_iterator
// does not catch it (an istream's own extractors do, and set badbit). Reading
// /proc/PID/maps of a process that exits between open(2) and read(2) fails
// with ESRCH (fs/proc/task_mmu.c, m_start()), so any process on the machine
// could kill recorderd by exiting at the wrong moment; CI saw it happen.
#pragma once

#include <cstddef>
#include <string>

#include "common/status.h"

namespace flightrec {

// The contents of `fd` from its current offset to end of file. A file longer
// than `max_bytes` is an error (kUnsupported), not a silent truncation; a
// failed read(2) is an ErrnoStatus carrying its errno.
StatusOr<std::string> ReadFdToString(int fd, size_t max_bytes);

// As ReadFdToString, on `path` opened read-only (O_CLOEXEC).
StatusOr<std::string> ReadFileToString(const std::string& path, size_t max_bytes);

}  // namespace flightrec
