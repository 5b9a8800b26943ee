// GNU build-ids (NT_GNU_BUILD_ID notes): the identity of a file that record
// cookies, debug-file lookup and the unwinder's file checks compare.
#pragma once

#include <libelf.h>

#include <string>

namespace flightrec::recorder::elf {

// The raw build-id bytes of an open ELF handle ("" if none).
std::string BuildIdOf(Elf* elf);
// The raw build-id bytes of an ELF file ("" if none, not ELF or unreadable).
std::string ReadBuildId(const std::string& path);
// Raw bytes as lowercase hex, the form cookies and records hold.
std::string HexBuildId(const std::string& raw);

}  // namespace flightrec::recorder::elf
