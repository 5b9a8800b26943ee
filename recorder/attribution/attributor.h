// Samples to (file cookie, file offset) frames through the process table.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "recorder/attribution/process_table.h"
#include "recorder/model/events.h"
#include "recorder/model/frame_status.h"

namespace flightrec::recorder::attribution {

struct Frame {
  bool kernel = false;
  uint32_t cookie = 0;  // user frames: file cookie (0 = unmapped/anonymous)
  uint64_t offset = 0;  // user: file offset; kernel: address; unmapped: ip
  std::string special;  // "[vdso]", "[anon]", "[unknown]"
};

// The frame statuses and the symbolized frame live in model/, below the
// unwinder and the symbolizer that fill them; attribution:: names them too.
using recorder::Symbol;
using recorder::SymbolCode;
using recorder::SymbolStatus;
using recorder::UnwindCode;
using recorder::UnwindNote;
using recorder::UnwindStatus;

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

}  // namespace flightrec::recorder::attribution
