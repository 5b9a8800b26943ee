// ResolveSymbolFileOffset: "/path/bin:symbol" → the file offset the kernel's
// uprobe PMU wants (attr.probe_offset is an offset into the file, not a
// virtual address: kernel/trace/trace_uprobe.c create_local_trace_uprobe).
#pragma once

#include <cstdint>
#include <string>

#include "common/scoped_fd.h"
#include "common/status.h"

namespace flightrec::recorder {

struct UprobeTarget {
  std::string path;
  std::string symbol;
  uint64_t file_offset = 0;
  // The file the offset was resolved in, open: the kernel is given
  // /proc/self/fd/N, so the probe goes on this very file whatever the path
  // names by then. Empty only from ParseUprobeSpec.
  ScopedFd file;
};

// Parses "PATH:SYMBOL" (or "PATH:0xOFFSET") without touching the file.
StatusOr<UprobeTarget> ParseUprobeSpec(const std::string& spec);

// ParseUprobeSpec, then opens the file (a regular file only) with the
// caller's credentials and resolves the symbol through .symtab, then
// .dynsym, mapping st_value through the PT_LOAD segment that contains it.
StatusOr<UprobeTarget> ResolveUprobeTarget(const std::string& spec);

}  // namespace flightrec::recorder
