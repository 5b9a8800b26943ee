// How a frame came to be: how DWARF unwinding of a sample's user stack ended
// and whether each frame could be named. Filled by unwind/ and symbolize/,
// carried by attribution/ and printed by every report, so the types sit
// below all of them; the printed text is part of reports and exports.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/text_enum.h"

namespace flightrec::recorder {

// How DWARF unwinding of a sample's user stack ended.
enum class UnwindCode : uint8_t {
  kNone,          // "": not unwound (frame-pointer chain)
  kOk,            // the whole stack
  kTruncated,     // the frame limit
  kMissingFile,   // a frame in a file that is gone, changed, or no file ([vdso], JIT)
  kNoUnwindInfo,  // a file without usable CFI
  kError,         // anything else (unmapped address, bad CFI, libunwind errors)
};
struct UnwindCodeTraits {
  using Enum = UnwindCode;
  static constexpr std::string_view kNames[] = {
      "", "ok", "truncated", "missing_file", "no_unwind_info", "error"};
  static constexpr Enum kUnknown = UnwindCode::kError;
};
using UnwindStatus = TextEnum<UnwindCodeTraits>;

// Why a sample's user stack is incomplete (empty = complete or not unwound).
struct UnwindNote {
  UnwindStatus status;
  std::string where;  // the frame/file where unwinding stopped
};

// Whether a frame could be named, and if not why: kNone "" (an inline
// chain's entry that takes its caller's), kOk, kNoSymbol (no symbol covers
// the address), kFileChanged (another build on disk: build-id or inode
// differs), kFileMissing (gone or unreadable), kUnmapped (not in a file:
// [anon], [unknown], [vdso] without an image).
enum class SymbolCode : uint8_t { kNone, kOk, kNoSymbol, kFileChanged, kFileMissing, kUnmapped };
struct SymbolCodeTraits {
  using Enum = SymbolCode;
  static constexpr Enum kUnknown = SymbolCode::kNoSymbol;  // text from outside names no code
  static constexpr std::string_view kNames[] = {
      "", "ok", "no_symbol", "file_changed", "file_missing", "unmapped"};
};
using SymbolStatus = TextEnum<SymbolCodeTraits>;

// Symbolized frame, for reports.
struct Symbol {
  std::string function;  // demangled; "" if unknown
  std::string dso;       // path or [kernel.kallsyms]
  uint64_t offset = 0;   // file offset (user) or address (kernel)
  SymbolStatus status;
  std::string file;      // source file where DWARF line info exists, else ""
  uint32_t line = 0;     // source line (0 = unknown)
  bool inlined = false;  // an inlined function; the next symbol is its caller
  std::string Display() const;
};

}  // namespace flightrec::recorder
