// Samples to (file cookie, file offset) frames through the process table.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/text_enum.h"
#include "recorder/attribution/process_table.h"
#include "recorder/model/events.h"

namespace flightrec::recorder::attribution {

struct Frame {
  bool kernel = false;
  uint32_t cookie = 0;  // user frames: file cookie (0 = unmapped/anonymous)
  uint64_t offset = 0;  // user: file offset; kernel: address; unmapped: ip
  std::string special;  // "[vdso]", "[anon]", "[unknown]"
};

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

struct AttributedSample : SampleHead {
  std::string comm;
  std::vector<Frame> frames;  // innermost first: kernel frames, then user frames
  UnwindNote unwind;          // set when the user part came from DWARF unwinding
};

// Unwinds a sample's copied user stack (Sample::user_stack) into user-space
// instruction pointers, innermost first, using the mappings known at the
// sample's time. Implemented by recorder/unwind (libunwind remote API); the
// Attributor calls it when one is set and the sample carries a stack.
class UserUnwinder {
 public:
  virtual ~UserUnwinder() = default;
  virtual std::vector<uint64_t> Unwind(const Sample& s, const ProcessTable& table,
                                       const CookieTable& cookies, UnwindNote* note) = 0;
};

// The one translation of a sample: kernel frames as addresses, user frames
// as (cookie, file offset) through the mappings `table` holds now. The daemon
// calls it on its live table at capture time; Attributor::Add calls it on the
// table rebuilt from a record. no_mapping counts user IPs without a mapping.
AttributedSample Attribute(const Sample& s, const ProcessTable& table, const CookieTable& cookies,
                           UserUnwinder* unwinder, uint64_t* no_mapping);

class Attributor {
 public:
  Attributor() : table_(&cookies_) {}
  // Feed events in time order; samples come back attributed.
  std::optional<AttributedSample> Add(const Event& e);
  const CookieTable& cookies() const { return cookies_; }
  CookieTable& mutable_cookies() { return cookies_; }
  ProcessTable& table() { return table_; }
  uint64_t no_mapping() const { return no_mapping_; }
  // Not owned; nullptr = use the sample's frame-pointer user chain as is.
  void set_unwinder(UserUnwinder* u) { unwinder_ = u; }

 private:
  UserUnwinder* unwinder_ = nullptr;
  CookieTable cookies_;
  ProcessTable table_;
  uint64_t no_mapping_ = 0;
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

}  // namespace flightrec::recorder::attribution
